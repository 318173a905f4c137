// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! What a check returns: a [`Check`] line with its [`Status`].

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Worth knowing; nothing is wrong or it cannot be told.
    Info,
    /// GPUDirect RDMA works, but slower or fragile.
    Warn,
    /// GPUDirect RDMA cannot work until this is fixed.
    Fail,
}

impl Status {
    /// The name printed in both outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Stable identifier (`module.loaded`).
    pub id: &'static str,
    /// The verdict.
    pub status: Status,
    /// The finding, one line.
    pub summary: String,
    /// Supporting facts, one per line.
    pub detail: Vec<String>,
    /// What the administrator should do (every WARN and FAIL has one).
    pub fix: Option<String>,
}

impl Check {
    /// A check with no fix.
    pub fn new(id: &'static str, status: Status, summary: impl Into<String>) -> Check {
        Check {
            id,
            status,
            summary: summary.into(),
            detail: Vec::new(),
            fix: None,
        }
    }

    /// An OK line.
    pub fn ok(id: &'static str, summary: impl Into<String>) -> Check {
        Check::new(id, Status::Ok, summary)
    }

    /// An INFO line.
    pub fn info(id: &'static str, summary: impl Into<String>) -> Check {
        Check::new(id, Status::Info, summary)
    }

    /// A WARN line with its fix.
    pub fn warn(id: &'static str, summary: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Warn, summary).fix(fix)
    }

    /// A FAIL line with its fix.
    pub fn fail(id: &'static str, summary: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Fail, summary).fix(fix)
    }

    /// Sets the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    /// Sets the detail lines.
    pub fn detail(mut self, detail: Vec<String>) -> Check {
        self.detail = detail;
        self
    }
}

/// One counter of the module's statistics file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Counter name.
    pub name: String,
    /// Its value as printed.
    pub value: String,
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! Empty: the models are in tests/protocol.rs.

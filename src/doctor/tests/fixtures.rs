// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause

//! One test per fixture under `tests/fixtures/`: build the tree, run the
//! doctor (library and binary), compare with the fixture's `expect` file.

mod support;

macro_rules! fixtures {
    ($($test:ident => $dir:literal,)*) => {
        $(
            #[test]
            fn $test() {
                support::check_fixture($dir);
            }
        )*

        /// Every fixture directory has a test above.
        #[test]
        fn every_fixture_is_tested() {
            let listed = [$($dir),*];
            let mut missing = Vec::new();
            for entry in std::fs::read_dir(support::fixture::fixtures_dir()).expect("tests/fixtures") {
                let entry = entry.expect("tests/fixtures entry");
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.path().join("expect").exists() && !listed.contains(&name.as_str()) {
                    missing.push(name);
                }
            }
            assert!(missing.is_empty(), "fixtures without a test: {missing:?}");
        }
    };
}

fixtures! {
    pix => "pix",
}

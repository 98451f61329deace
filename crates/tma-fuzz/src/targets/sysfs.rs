//! sysfs PMU descriptions (`tma_host::sysfs`): the input is a PMU written as lines —
//! `format/<field>` files as `<field> <content>` (`event config:0-7`) up to the first blank
//! line, then event alias terms (`event=0x3c,umask=0x1`), one per line, each encoded
//! through the parsed formats as perf does.
use std::collections::BTreeMap;

use crate::{Bound, Target};
use tma_host::sysfs::{Format, Pmu};

pub const TARGET: Target = Target {
    name: "sysfs",
    setup: crate::no_setup,
    bound: |_| Bound {
        per_byte: 64,
        fixed: 1 << 20,
    },
    run: |data| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let (formats_text, events_text) = text.split_once("\n\n").unwrap_or((text, ""));
        let mut formats = BTreeMap::new();
        for line in formats_text.lines() {
            let (field, content) = line.split_once(' ').unwrap_or((line, ""));
            if let Some(f) = Format::parse(content) {
                let _ = f.bits();
                let _ = f.place(u64::MAX);
                formats.insert(field.to_string(), f);
            }
        }
        let mut events = BTreeMap::new();
        for (i, terms) in events_text.lines().enumerate() {
            events.insert(format!("e{i}"), terms.to_string());
        }
        let pmu = Pmu {
            name: "cpu".into(),
            type_: 4,
            formats,
            events,
            caps: BTreeMap::new(),
            nr_addr_filters: None,
            cpus: None,
            rdpmc: None,
        };
        for terms in events_text.lines() {
            let _ = pmu.encode_terms(terms);
        }
        let _ = pmu.encode_alias("e0");
    },
};

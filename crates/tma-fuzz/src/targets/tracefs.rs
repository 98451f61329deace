//! tracefs event `format` files (`tma_perf::tracefs::EventFormat::parse`), and raw records
//! read through the parsed format: the input is the format text, then optionally a NUL byte
//! and a raw record, which is decoded field by field, by the KVM decoder, and as a perf
//! sample record body (`tma_perf::tracepoint::parse_record`).
use crate::{Bound, Target};

pub const TARGET: Target = Target {
    name: "tracefs",
    setup: crate::no_setup,
    bound: |_| Bound {
        per_byte: 64,
        fixed: 1 << 20,
    },
    run: |data| {
        let (text, raw) = match data.iter().position(|&b| b == 0) {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[][..]),
        };
        let _ = tma_perf::tracepoint::parse_record(9, raw);
        let Ok(fmt) = tma_perf::tracefs::format::EventFormat::parse(text) else {
            return;
        };
        for f in &fmt.fields {
            let _ = f.read_u64(raw);
            let _ = f.bytes(raw);
        }
        if let Ok(dec) = tma_kvm::decode::Decoder::new(std::slice::from_ref(&fmt)) {
            let _ = dec.decode(raw);
        }
    },
};

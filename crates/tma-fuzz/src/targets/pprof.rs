//! pprof profiles (gzip-compressed or plain protobuf) through `tma_profile::pprof::decode`.
//!
//! Bound: the decoded message may take 128 bytes per protobuf byte (prost's structs for
//! short repeated messages are that much larger than their encoding) plus 8 MiB; a
//! compressed profile may inflate to `MAX_INFLATE_RATIO` times its size plus
//! `MAX_INFLATE_SLACK` (what `decode` allows), so its bound is the protobuf bound of that.
use crate::{Bound, Target};
use tma_profile::pprof::{MAX_INFLATE_RATIO, MAX_INFLATE_SLACK};

const PROTOBUF: Bound = Bound {
    per_byte: 128,
    fixed: 8 << 20,
};

pub const TARGET: Target = Target {
    name: "pprof",
    setup: crate::no_setup,
    bound: |data| {
        if data.starts_with(&[0x1f, 0x8b]) {
            Bound {
                per_byte: PROTOBUF.per_byte * MAX_INFLATE_RATIO as usize,
                fixed: PROTOBUF.per_byte * MAX_INFLATE_SLACK as usize + PROTOBUF.fixed,
            }
        } else {
            PROTOBUF
        }
    },
    run: |data| {
        let _ = tma_profile::pprof::decode(data);
    },
};

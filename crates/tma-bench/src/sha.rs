//! `--preset sha`: SHA-NI instruction costs and the SHA-256 lower bounds they imply.
//!
//! Model (per 64-byte block, the standard SHA-NI sequence: 32 SHA256RNDS2, 12 SHA256MSG1,
//! 12 SHA256MSG2, plus PADDD/PALIGNR/PSHUFB that are not counted here):
//! * Round chain: round pair k reads the state produced by pair k-1 as its source operand
//!   (pair 2->1) and the state of pair k-2 as its destination (pair 1->1), so the rounds need at
//!   least `max(32 x lat(2->1), 16 x lat(1->1))` cycles.
//! * Message-schedule chain: each of the 12 schedule steps is SHA256MSG2 (1->1 latency) plus one
//!   dependent PADDD (taken as 1 cycle); it is on the critical path only when
//!   `12 x (lat(msg2) + 1)` exceeds the round chain.
//! * One stream: the larger of the two chains.
//! * Interleaved streams (independent messages): bounded by throughput:
//!   `max(32 x tp(rnds2), 12 x tp(msg1), 12 x tp(msg2))` if the three use separate units, and
//!   the sum if they share one (both are printed; the truth lies between).

use serde::{Deserialize, Serialize};

use crate::{bench, BenchError, FormReport, Options, Source};

/// The SHA forms measured by the preset: SHA-256 always, SHA-1 too (same CPUID bit, SHA).
pub const SHA_FORMS: [&str; 7] = [
    "sha256rnds2 xmm1, xmm2",
    "sha256msg1 xmm1, xmm2",
    "sha256msg2 xmm1, xmm2",
    "sha1rnds4 xmm1, xmm2, 0",
    "sha1nexte xmm1, xmm2",
    "sha1msg1 xmm1, xmm2",
    "sha1msg2 xmm1, xmm2",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShaBounds {
    pub rnds2_lat_src: f64,
    pub rnds2_lat_dst: f64,
    pub rnds2_tp: f64,
    pub msg1_tp: f64,
    pub msg2_lat: f64,
    pub msg2_tp: f64,
    pub round_chain_cycles: f64,
    pub schedule_chain_cycles: f64,
    /// Cycles per 64-byte block, one stream.
    pub one_stream_cycles_per_block: f64,
    /// Cycles per 64-byte block with many interleaved streams, separate units.
    pub interleaved_cycles_per_block: f64,
    /// Same, if RNDS2/MSG1/MSG2 share one unit.
    pub interleaved_shared_unit_cycles_per_block: f64,
    pub model: String,
}

impl ShaBounds {
    pub fn one_stream_cycles_per_byte(&self) -> f64 {
        self.one_stream_cycles_per_block / 64.0
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShaReport {
    pub forms: Vec<FormReport>,
    pub bounds: ShaBounds,
}

fn pair_lat(f: &FormReport, pair: &str) -> Option<f64> {
    f.latency
        .iter()
        .find(|p| p.pair == pair)
        .and_then(|p| p.figures.first())
        .map(|x| x.median)
}

/// Compute the bounds from measured figures (pure; see the module docs for the model).
pub fn bounds(
    rnds2_lat_src: f64,
    rnds2_lat_dst: f64,
    rnds2_tp: f64,
    msg1_tp: f64,
    msg2_lat: f64,
    msg2_tp: f64,
) -> ShaBounds {
    let round_chain = (32.0 * rnds2_lat_src).max(16.0 * rnds2_lat_dst);
    let schedule_chain = 12.0 * (msg2_lat + 1.0);
    ShaBounds {
        rnds2_lat_src,
        rnds2_lat_dst,
        rnds2_tp,
        msg1_tp,
        msg2_lat,
        msg2_tp,
        round_chain_cycles: round_chain,
        schedule_chain_cycles: schedule_chain,
        one_stream_cycles_per_block: round_chain.max(schedule_chain),
        interleaved_cycles_per_block: (32.0 * rnds2_tp).max(12.0 * msg1_tp).max(12.0 * msg2_tp),
        interleaved_shared_unit_cycles_per_block: 32.0 * rnds2_tp + 12.0 * msg1_tp + 12.0 * msg2_tp,
        model: "per 64-byte block: 32 SHA256RNDS2 + 12 SHA256MSG1 + 12 SHA256MSG2; one stream = \
                max(32 x lat(rnds2 2->1, timed as sha256rnds2 xmm1, xmm1), 16 x lat(rnds2 1->1), \
                12 x (lat(msg2) + 1 paddd)); \
                interleaved = max(32 x tp(rnds2), 12 x tp(msg1), 12 x tp(msg2)) with separate \
                units, sum if shared; PADDD/PALIGNR/PSHUFB and loads not counted"
            .into(),
    }
}

/// Measure the SHA-NI instructions and derive the SHA-256 lower bounds.
/// SHA-1 forms are measured too (they share the SHA CPUID bit).
pub fn preset_sha(opts: &Options) -> Result<ShaReport, BenchError> {
    let mut forms = Vec::new();
    for f in SHA_FORMS {
        forms.push(bench(&Source::Text(f.to_string()), opts)?);
    }
    let need = |v: Option<f64>, what: &str| {
        v.ok_or_else(|| BenchError::Measurement(format!("--preset sha: {what} was not measured")))
    };
    let b = bounds(
        need(pair_lat(&forms[0], "2->1"), "sha256rnds2 latency 2->1")?,
        need(pair_lat(&forms[0], "1->1"), "sha256rnds2 latency 1->1")?,
        need(forms[0].throughput_summary(), "sha256rnds2 throughput")?,
        need(forms[1].throughput_summary(), "sha256msg1 throughput")?,
        need(pair_lat(&forms[2], "1->1"), "sha256msg2 latency")?,
        need(forms[2].throughput_summary(), "sha256msg2 throughput")?,
    );
    Ok(ShaReport { forms, bounds: b })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_follow_the_model() {
        // Zen 3-like numbers: rnds2 lat 4, tp 2; msg1 tp 0.5; msg2 lat 3, tp 2.
        let b = bounds(4.0, 4.0, 2.0, 0.5, 3.0, 2.0);
        assert_eq!(b.round_chain_cycles, 128.0);
        assert_eq!(b.schedule_chain_cycles, 48.0);
        assert_eq!(b.one_stream_cycles_per_block, 128.0);
        assert_eq!(b.interleaved_cycles_per_block, 64.0);
        assert_eq!(
            b.interleaved_shared_unit_cycles_per_block,
            64.0 + 6.0 + 24.0
        );
        assert_eq!(b.one_stream_cycles_per_byte(), 2.0);
    }
}

//! perf ring-buffer records -> samples, from bytes (no syscalls): PERF_RECORD_SAMPLE with
//! `PERF_SAMPLE_TID | TIME | CPU | RAW`, and PERF_RECORD_LOST / THROTTLE.

/// A perf record relevant to KVM accounting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfRecord<'a> {
    Sample {
        pid: u32,
        tid: u32,
        time_ns: u64,
        cpu: u32,
        raw: &'a [u8],
    },
    /// The kernel dropped `lost` records because the ring was full.
    Lost { lost: u64 },
    /// Sampling was throttled (`true`) or unthrottled.
    Throttle(bool),
    /// Another record type.
    Other(u32),
}

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_THROTTLE: u32 = 5;
const PERF_RECORD_UNTHROTTLE: u32 = 6;
const PERF_RECORD_SAMPLE: u32 = 9;

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// Parse one record (8-byte header included). `None` when it is truncated.
pub fn parse(rec: &[u8]) -> Option<PerfRecord<'_>> {
    let ty = u32_at(rec, 0)?;
    Some(match ty {
        PERF_RECORD_SAMPLE => {
            let pid = u32_at(rec, 8)?;
            let tid = u32_at(rec, 12)?;
            let time_ns = u64_at(rec, 16)?;
            let cpu = u32_at(rec, 24)?;
            let size = u32_at(rec, 32)? as usize;
            let raw = rec.get(36..36 + size)?;
            PerfRecord::Sample {
                pid,
                tid,
                time_ns,
                cpu,
                raw,
            }
        }
        PERF_RECORD_LOST => PerfRecord::Lost {
            lost: u64_at(rec, 16)?,
        },
        PERF_RECORD_THROTTLE => PerfRecord::Throttle(true),
        PERF_RECORD_UNTHROTTLE => PerfRecord::Throttle(false),
        n => PerfRecord::Other(n),
    })
}

/// Build a PERF_RECORD_SAMPLE (tests, replay).
pub fn build_sample(pid: u32, tid: u32, time_ns: u64, cpu: u32, raw: &[u8]) -> Vec<u8> {
    let body = 8 + 8 + 8 + 4 + raw.len();
    let size = (8 + body).div_ceil(8) * 8;
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(&PERF_RECORD_SAMPLE.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&(size as u16).to_le_bytes());
    v.extend_from_slice(&pid.to_le_bytes());
    v.extend_from_slice(&tid.to_le_bytes());
    v.extend_from_slice(&time_ns.to_le_bytes());
    v.extend_from_slice(&cpu.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    v.extend_from_slice(raw);
    v.resize(size, 0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_roundtrip_and_lost() {
        let r = build_sample(10, 11, 12345, 1, &[1, 2, 3, 4, 5]);
        assert_eq!(r.len() % 8, 0);
        assert_eq!(
            parse(&r),
            Some(PerfRecord::Sample {
                pid: 10,
                tid: 11,
                time_ns: 12345,
                cpu: 1,
                raw: &[1, 2, 3, 4, 5]
            })
        );
        assert_eq!(parse(&r[..20]), None);
        let mut lost = vec![0u8; 24];
        lost[0] = 2;
        lost[6] = 24;
        lost[16] = 7;
        assert_eq!(parse(&lost), Some(PerfRecord::Lost { lost: 7 }));
    }
}

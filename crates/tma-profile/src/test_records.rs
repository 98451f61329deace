//! perf records made by hand for the tests of the readers (live and reordered): the
//! sampling attr image and the `sample_id_all` trailer.

use linux_perf_event_reader::{Endianness, PerfEventAttr, RecordParseInfo};

/// A perf_event_attr image like the one sampling gives the kernel: cpu-clock,
/// IP|TID|TIME|CPU|PERIOD, freq, sample_id_all, mmap2.
pub(crate) fn attr_image() -> Vec<u8> {
    let mut a = vec![0u8; 136];
    a[0..4].copy_from_slice(&1u32.to_le_bytes());
    a[4..8].copy_from_slice(&136u32.to_le_bytes());
    a[16..24].copy_from_slice(&4000u64.to_le_bytes());
    a[24..32].copy_from_slice(&(0x1u64 | 0x2 | 0x4 | 0x80 | 0x100).to_le_bytes());
    let flags: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18) | (1 << 23);
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    a
}

pub(crate) fn parse_info() -> RecordParseInfo {
    let a = attr_image();
    let (attr, _) = PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..]).unwrap();
    RecordParseInfo::new(&attr, Endianness::LittleEndian)
}

/// sample_id_all trailer (TID | TIME | CPU) with a given time.
pub(crate) fn trailer_at(b: &mut Vec<u8>, pid: i32, time: u64) {
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&pid.to_le_bytes());
    b.extend_from_slice(&time.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes()); // cpu
    b.extend_from_slice(&0u32.to_le_bytes());
}

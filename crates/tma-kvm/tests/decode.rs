//! kvm_exit decoding, pairing and rendering from synthetic records built with the offsets of
//! this machine's real tracefs format files (tests/fixtures/kvm/format-6.18) and of a hand-made
//! older-kernel variant (tests/fixtures/kvm/format-old: no `isa`, no `requests`, other offsets).

use tma_kvm::decode::{build_record, Decoder, KvmEvent};
use tma_kvm::reasons::{ExitReason, Isa};
use tma_kvm::stats::{Aggregator, KvmReport, Sample};
use tma_kvm::{render, EventFormat, RenderOptions};
use tma_perf::tracepoint::{parse_record, sample_body, TraceRecord, PERF_RECORD_SAMPLE};
use tma_testkit::{check_golden, fixture};

fn load(dir: &str) -> Vec<EventFormat> {
    let mut v: Vec<EventFormat> = std::fs::read_dir(fixture("kvm").join(dir))
        .unwrap()
        .map(|e| EventFormat::parse(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn fmt<'a>(f: &'a [EventFormat], name: &str) -> &'a EventFormat {
    f.iter().find(|x| x.name == name).unwrap()
}

/// Compares with tests/fixtures/kvm/golden/`name`; `UPDATE_GOLDEN=1` rewrites it (review the
/// diff).
fn golden(name: &str, actual: &str) {
    check_golden(fixture("kvm/golden").join(name), actual);
}

#[test]
fn real_format_offsets() {
    let f = load("format-6.18");
    let exit = fmt(&f, "kvm_exit");
    assert_eq!(exit.id, 103);
    let off = |n: &str| exit.field(n).map(|x| (x.offset, x.size));
    assert_eq!(off("exit_reason"), Some((8, 4)));
    assert_eq!(off("guest_rip"), Some((16, 8)));
    assert_eq!(off("isa"), Some((24, 4)));
    assert_eq!(off("info1"), Some((32, 8)));
    assert_eq!(off("info2"), Some((40, 8)));
    assert_eq!(off("intr_info"), Some((48, 4)));
    assert_eq!(off("error_code"), Some((52, 4)));
    assert_eq!(off("vcpu_id"), Some((56, 4)));
    assert_eq!(off("requests"), Some((64, 8)));
    assert!(exit.print_fmt.contains("TDCALL"));
    let entry = fmt(&f, "kvm_entry");
    assert_eq!(entry.id, 115);
    assert_eq!(entry.field("immediate_exit").unwrap().c_type, "bool");
    let emul = fmt(&f, "kvm_emulate_insn");
    assert_eq!(emul.field("insn").unwrap().size, 15);
    assert_eq!(fmt(&f, "kvm_userspace_exit").id, 42);
    assert!(fmt(&f, "kvm_userspace_exit").field("errno").unwrap().signed);
}

fn exit_rec(f: &[EventFormat], isa: Option<u32>, reason: u32, vcpu: u32, info1: u64) -> Vec<u8> {
    let e = fmt(f, "kvm_exit");
    let mut vals = vec![
        ("exit_reason", reason as u64),
        ("vcpu_id", vcpu as u64),
        ("guest_rip", 0xfff0),
        ("info1", info1),
        ("info2", 0x2222),
        ("intr_info", 0x8000_0020),
        ("error_code", 0),
    ];
    if let Some(i) = isa {
        vals.push(("isa", i as u64));
    }
    if e.field("requests").is_some() {
        vals.push(("requests", 0x40));
    }
    build_record(e, &vals).unwrap()
}

fn entry_rec(f: &[EventFormat], vcpu: u32) -> Vec<u8> {
    let e = fmt(f, "kvm_entry");
    let mut vals = vec![("vcpu_id", vcpu as u64)];
    if e.field("rip").is_some() {
        vals.push(("rip", 0xfff2));
    }
    build_record(e, &vals).unwrap()
}

fn msr_rec(f: &[EventFormat], write: bool, ecx: u32) -> Vec<u8> {
    build_record(
        fmt(f, "kvm_msr"),
        &[("write", write as u64), ("ecx", ecx as u64), ("data", 1)],
    )
    .unwrap()
}

/// Feed raw records through the perf record layer and the decoder, as the live path does.
fn feed(agg: &mut Aggregator, d: &Decoder, pid: u32, tid: u32, t: u64, raw: &[u8]) {
    let body = sample_body(pid, tid, t, 0, raw);
    let TraceRecord::Sample {
        pid,
        tid,
        time_ns,
        cpu,
        raw,
    } = parse_record(PERF_RECORD_SAMPLE, &body)
    else {
        panic!("not a sample")
    };
    let event = d.decode(raw).unwrap().expect("known id");
    agg.add(&Sample {
        pid,
        tid,
        time_ns,
        cpu,
        event,
    });
}

/// Exit/entry pairs: (isa, reason, handling ns), on two vCPU threads.
fn scenario(f: &[EventFormat], d: &Decoder, isa: Option<u32>, reasons: &[(u32, u64)]) -> KvmReport {
    let mut agg = Aggregator::new();
    let mut t = 1_000_000u64;
    for (i, &(reason, ns)) in reasons.iter().enumerate() {
        let vcpu = (i % 2) as u32;
        let tid = 500 + vcpu;
        feed(&mut agg, d, 400, tid, t, &exit_rec(f, isa, reason, vcpu, 0));
        // A TSC-deadline write inside a MSR_WRITE exit (VMX 32) or SVM msr write.
        if (isa == Some(1) || isa.is_none()) && reason == 32 || isa == Some(2) && reason == 0x7c {
            feed(&mut agg, d, 400, tid, t + 10, &msr_rec(f, true, 0x6e0));
        }
        feed(&mut agg, d, 400, tid, t + ns, &entry_rec(f, vcpu));
        t += 10_000;
    }
    agg.report(2.0, "kvm_intel")
}

const VMX_MIX: &[(u32, u64)] = &[
    (48, 2000),
    (48, 4000),
    (48, 3000),
    (1, 500),
    (1, 700),
    (32, 800),
    (52, 600),
    (77, 1500),
    (76, 900),          // unknown (SEAMCALL, not in this kernel's table)
    (0x8000_0021, 100), // INVALID_STATE with FAILED_VMENTRY
    (0x1234, 50),       // unknown code
    (84, 400),          // MSR_READ_IMM
];

#[test]
fn vmx_and_tdx_decoding_pairing_and_golden() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    // Field-level decode of one record.
    let raw = exit_rec(&f, Some(1), 0x8000_0021, 3, 0xabc);
    match d.decode(&raw).unwrap().unwrap() {
        KvmEvent::Exit(e) => {
            assert_eq!(e.reason, ExitReason::decode(Isa::Vmx, 0x8000_0021));
            assert_eq!(e.reason.to_string(), "INVALID_STATE FAILED_VMENTRY");
            assert_eq!(e.raw_reason, 0x8000_0021);
            assert_eq!(e.vcpu_id, Some(3));
            assert_eq!(e.info1, Some(0xabc));
            assert_eq!(e.info2, Some(0x2222));
            assert_eq!(e.intr_info, Some(0x8000_0020));
            assert_eq!(e.guest_rip, Some(0xfff0));
            assert_eq!(e.requests, Some(0x40));
        }
        other => panic!("{other:?}"),
    }
    let r = scenario(&f, &d, Some(1), VMX_MIX);
    assert_eq!(r.totals.kvm_exit, 12);
    assert_eq!(r.totals.kvm_entry, 12);
    assert_eq!(r.unpaired_exits, 0);
    let ept = r.exits.iter().find(|x| x.name == "EPT_VIOLATION").unwrap();
    assert_eq!(ept.count, 3);
    assert_eq!(ept.paired, 3);
    assert_eq!(ept.min_us, Some(2.0));
    assert_eq!(ept.max_us, Some(4.0));
    assert!((ept.mean_us.unwrap() - 3.0).abs() < 1e-9);
    // stddev 1us, sem = 1/sqrt(3) us, relative to 3us.
    assert!((ept.mean_rel_err_pct.unwrap() - 100.0 / 3.0 / 3f64.sqrt()).abs() < 1e-6);
    assert!((ept.share_pct - 25.0).abs() < 1e-9);
    assert!((ept.rate_per_s - 1.5).abs() < 1e-9);
    assert!(r
        .exits
        .iter()
        .any(|x| x.name == "unknown VMX 76" && x.code == 76 && !x.known));
    assert!(r.exits.iter().any(|x| x.name == "unknown VMX 4660"));
    assert!(r.exits.iter().any(|x| x.name == "TDCALL" && x.code == 77));
    // timer = 2 EXTERNAL_INTERRUPT + 1 PREEMPTION_TIMER + 1 TDCALL + 1 TSC-deadline write.
    assert_eq!(r.timer.total, 5);
    assert_eq!(r.timer.tsc_deadline_msr_writes, 1);
    // The TSC-deadline kvm_msr (at +10 ns) is timed to the kvm_entry (at +800 ns), as perf
    // kvm stat --event=msr does.
    let m = r.msr.iter().find(|m| m.msr == 0x6e0).unwrap();
    assert_eq!((m.paired, m.mean_us), (1, Some(0.79)));
    assert_eq!(r.per_vcpu.len(), 2);
    assert_eq!(r.per_vcpu[0].vcpu_id, Some(0));
    assert!(r.kvm_exit_not_emitted.is_none());
    let mut out = Vec::new();
    render(&mut out, &r, RenderOptions { per_vcpu: true }).unwrap();
    golden("vmx.txt", &String::from_utf8(out).unwrap());
}

#[test]
fn svm_decoding_and_golden() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    let mix: &[(u32, u64)] = &[
        (0x400, 3000),
        (0x400, 5000),
        (0x060, 400),
        (0x07c, 900),
        (0x8000_0002, 2500),
        (0x04e, 700),
        (0xffff_ffff, 100),
        (0x1234, 50),
        (0x0a6, 10_000),
    ];
    let r = scenario(&f, &d, Some(2), mix);
    let names: Vec<&str> = r.exits.iter().map(|x| x.name.as_str()).collect();
    for n in [
        "npf",
        "interrupt",
        "msr",
        "vmgexit_mmio_write",
        "PF excp",
        "invalid_guest_state",
        "unknown SVM 0x1234",
        "idle-halt",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    // interrupt + the TSC-deadline write under the msr exit.
    assert_eq!(r.timer.total, 2);
    assert_eq!(r.timer.svm_interrupt, 1);
    let mut out = Vec::new();
    render(&mut out, &r, RenderOptions::default()).unwrap();
    golden("svm.txt", &String::from_utf8(out).unwrap());
}

#[test]
fn tdcall_msr_write_counts_once_in_timer() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    let mut agg = Aggregator::new();
    feed(&mut agg, &d, 1, 2, 100, &exit_rec(&f, Some(1), 77, 0, 0));
    feed(&mut agg, &d, 1, 2, 150, &msr_rec(&f, true, 0x6e0));
    feed(&mut agg, &d, 1, 2, 200, &entry_rec(&f, 0));
    // A TSC-deadline write under a plain MSR_WRITE exit counts.
    feed(&mut agg, &d, 1, 2, 300, &exit_rec(&f, Some(1), 32, 0, 0));
    feed(&mut agg, &d, 1, 2, 350, &msr_rec(&f, true, 0x6e0));
    feed(&mut agg, &d, 1, 2, 400, &entry_rec(&f, 0));
    // Reads and other MSRs do not.
    feed(&mut agg, &d, 1, 2, 450, &msr_rec(&f, false, 0x6e0));
    feed(&mut agg, &d, 1, 2, 460, &msr_rec(&f, true, 0x10));
    let r = agg.report(1.0, "kvm_intel");
    assert_eq!(r.timer.tdcall, 1);
    assert_eq!(r.timer.tsc_deadline_msr_writes, 1);
    assert_eq!(r.timer.total, 2);
}

#[test]
fn unknown_isa_shows_raw_number() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    match d.decode(&exit_rec(&f, Some(7), 12, 0, 0)).unwrap().unwrap() {
        KvmEvent::Exit(e) => assert_eq!(e.reason.to_string(), "unknown isa 7 reason 0xc"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn older_kernel_offsets_are_read_not_assumed() {
    let new = load("format-6.18");
    let old = load("format-old");
    let old_exit = fmt(&old, "kvm_exit");
    assert!(old_exit.field("isa").is_none());
    assert!(old_exit.field("requests").is_none());
    assert_eq!(old_exit.field("exit_reason").unwrap().offset, 12);
    let mut d_old = Decoder::new(&old).unwrap();
    d_old.isa_fallback = Some(Isa::Vmx);
    let d_new = Decoder::new(&new).unwrap();
    // The same logical exits, laid out per each kernel, decode to the same reasons.
    for &(reason, _) in VMX_MIX {
        let a = d_old
            .decode(&exit_rec(&old, None, reason, 1, 5))
            .unwrap()
            .unwrap();
        let b = d_new
            .decode(&exit_rec(&new, Some(1), reason, 1, 5))
            .unwrap()
            .unwrap();
        match (a, b) {
            (KvmEvent::Exit(a), KvmEvent::Exit(b)) => {
                assert_eq!(a.reason, b.reason);
                assert_eq!(a.vcpu_id, Some(1));
                assert_eq!(a.info1, Some(5));
                assert_eq!(a.requests, None);
                assert_eq!(b.requests, Some(0x40));
            }
            other => panic!("{other:?}"),
        }
    }
    // Decoding an old record with the new offsets would be wrong: prove the layouts differ.
    let raw_old = exit_rec(&old, None, 48, 1, 5);
    match d_new.decode(&build_record(fmt(&new, "kvm_exit"), &[("exit_reason", 48)]).unwrap()) {
        Ok(Some(KvmEvent::Exit(e))) => assert_eq!(e.raw_reason, 48),
        other => panic!("{other:?}"),
    }
    assert_ne!(&raw_old[8..12], &48u32.to_le_bytes());
    // Pairing with an entry that has only vcpu_id.
    let r = scenario(&old, &d_old, None, &VMX_MIX[..4]);
    assert_eq!(
        r.exits
            .iter()
            .find(|x| x.name == "EPT_VIOLATION")
            .unwrap()
            .paired,
        3
    );
    // kvm_msr without the `exception` field.
    match d_old.decode(&msr_rec(&old, true, 0x6e0)).unwrap().unwrap() {
        KvmEvent::Msr {
            write,
            ecx,
            exception,
            ..
        } => {
            assert!(write);
            assert_eq!(ecx, 0x6e0);
            assert!(!exception);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_record_is_an_error_not_a_panic() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    let raw = exit_rec(&f, Some(1), 48, 0, 0);
    assert!(d.decode(&raw[..20]).is_err());
    assert!(d.decode(&raw[..1]).is_err());
    // An id this decoder does not know is skipped.
    let mut other = raw.clone();
    other[0] = 0xee;
    other[1] = 0xee;
    assert_eq!(d.decode(&other).unwrap(), None);
}

#[test]
fn pvm_backend_line_and_vmm_breakdown_golden() {
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    let mut agg = Aggregator::new();
    let mut t = 0;
    let mut put = |raw: Vec<u8>| {
        t += 100;
        feed(&mut agg, &d, 77, 78, t, &raw);
    };
    let ux = |r: u64| build_record(fmt(&f, "kvm_userspace_exit"), &[("reason", r)]).unwrap();
    for _ in 0..3 {
        put(build_record(
            fmt(&f, "kvm_pio"),
            &[("rw", 1), ("port", 0x10), ("size", 1), ("count", 1)],
        )
        .unwrap());
        put(ux(2));
        put(build_record(
            fmt(&f, "kvm_mmio"),
            &[("type", 2), ("len", 1), ("gpa", 0x20000)],
        )
        .unwrap());
        put(ux(6));
        put(build_record(
            fmt(&f, "kvm_mmio"),
            &[("type", 0), ("len", 1), ("gpa", 0x20000)],
        )
        .unwrap());
        put(ux(6));
        put(build_record(
            fmt(&f, "kvm_mmio"),
            &[("type", 1), ("len", 1), ("gpa", 0x20000)],
        )
        .unwrap());
        put(ux(5));
        put(build_record(fmt(&f, "kvm_cpuid"), &[("function", 0)]).unwrap());
        put(msr_rec(&f, false, 0x174));
        put(msr_rec(&f, true, 0x174));
        put(build_record(fmt(&f, "kvm_emulate_insn"), &[("len", 1)]).unwrap());
    }
    put(build_record(
        fmt(&f, "kvm_userspace_exit"),
        &[("reason", 0), ("errno", (-4i64) as u64)],
    )
    .unwrap());
    let r = agg.report(0.5, "kvm_pvm");
    let line = r.kvm_exit_not_emitted.clone().unwrap();
    assert!(line.starts_with("kvm_pvm does not emit kvm_exit"), "{line}");
    assert!(line.contains("(IO 3, MMIO 6, HLT 3, other 1)"), "{line}");
    assert_eq!(r.totals.kvm_mmio, 9);
    let mut out = Vec::new();
    render(&mut out, &r, RenderOptions::default()).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("VM-EXIT"), "no empty exit table:\n{text}");
    golden("pvm.txt", &text);
}

#[test]
fn lost_and_throttled_records_are_reported() {
    let mut agg = Aggregator::new();
    agg.lost = 17;
    agg.throttled = 2;
    let r = agg.report(1.0, "kvm_amd");
    assert_eq!(r.lost_records, 17);
    let mut out = Vec::new();
    render(&mut out, &r, RenderOptions::default()).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(s.contains("the kernel lost 17 records"), "{s}");
    assert!(s.contains("throttled sampling 2 times"), "{s}");
    assert!(s.contains("No KVM events were recorded"), "{s}");
}

/// The `tma.kvm` round trip: what `tma kvm --json` writes (the run and its `-I` intervals)
/// reads back into [`tma_kvm::doc::KvmDoc`], equal to the document of the run, and that,
/// written again, gives the same bytes.
#[test]
fn the_json_document_reads_back_as_written() {
    use tma_kvm::doc::KvmDoc;
    let f = load("format-6.18");
    let d = Decoder::new(&f).unwrap();
    let run = scenario(&f, &d, Some(1), VMX_MIX);
    let intervals = [
        scenario(&f, &d, Some(1), &VMX_MIX[..6]),
        scenario(&f, &d, Some(2), &[(0x400, 3000), (0x07c, 900)]),
        Aggregator::new().report(1.0, "kvm_amd"),
    ];
    let mut bytes = Vec::new();
    render::json(&mut bytes, &run, &intervals).unwrap();
    let doc: KvmDoc = tma_testkit::round_trip(&bytes, render::SCHEMA, render::SCHEMA_VERSION);
    assert_eq!(doc, KvmDoc::of(&run, &intervals));
    assert_eq!(doc.intervals.len(), 3);
    assert_eq!(doc.report.totals.kvm_exit, 12);
}

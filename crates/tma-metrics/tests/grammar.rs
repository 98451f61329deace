//! Every construct of the formula language: parse, normalized Display, round trip, errors.

use std::collections::HashMap;

use tma_catalog::{CoreKind, MetricDef, Model, Topdown, Unit, Vendor};
use tma_metrics::expr::{parse, BinOp, Expr, Func, Ident};
use tma_metrics::{evaluate_metric, Constants, Status};

fn id(s: &str) -> Expr {
    Expr::Ident(Ident { text: s.into() })
}
fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Bin(op, Box::new(a), Box::new(b))
}
fn num(n: f64) -> Expr {
    Expr::Num(n)
}
/// Parse, check the normalized text, and check that the text parses back to the same AST.
fn norm(src: &str) -> String {
    let e = parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    let s = e.to_string();
    let again = parse(&s).unwrap_or_else(|e| panic!("re-parse of {s}: {e}"));
    assert_eq!(e, again, "round trip of {src} via {s}");
    s
}
fn err(src: &str) -> (usize, String) {
    let e = parse(src).expect_err(src);
    (e.pos, e.message)
}

#[test]
fn numbers() {
    assert_eq!(parse("12").unwrap(), num(12.0));
    assert_eq!(parse("1.5").unwrap(), num(1.5));
    assert_eq!(parse(".5").unwrap(), num(0.5));
    assert_eq!(parse("5.").unwrap(), num(5.0));
    assert_eq!(parse("1e9").unwrap(), num(1e9));
    assert_eq!(parse("1e-6").unwrap(), num(1e-6));
    assert_eq!(parse("2.5E+3").unwrap(), num(2500.0));
    assert!(matches!(parse("NaN").unwrap(), Expr::Num(n) if n.is_nan()));
    assert_eq!(norm("1e9"), "1000000000");
    assert_eq!(norm(".25"), "0.25");
}

#[test]
fn precedence_levels() {
    // * binds tighter than +
    assert_eq!(
        parse("a + b * c").unwrap(),
        bin(BinOp::Add, id("a"), bin(BinOp::Mul, id("b"), id("c")))
    );
    // + tighter than comparison, comparison tighter than &, & than ^, ^ than |
    assert_eq!(
        parse("a > 0.2 & b > 0.2").unwrap(),
        bin(
            BinOp::And,
            bin(BinOp::Gt, id("a"), num(0.2)),
            bin(BinOp::Gt, id("b"), num(0.2))
        )
    );
    assert_eq!(
        parse("a | b ^ c & d").unwrap(),
        bin(
            BinOp::Or,
            id("a"),
            bin(BinOp::Xor, id("b"), bin(BinOp::And, id("c"), id("d")))
        )
    );
    assert_eq!(
        parse("a < b + 1").unwrap(),
        bin(BinOp::Lt, id("a"), bin(BinOp::Add, id("b"), num(1.0)))
    );
    assert_eq!(
        parse("a % b + c").unwrap(),
        bin(BinOp::Add, bin(BinOp::Rem, id("a"), id("b")), id("c"))
    );
    assert_eq!(norm("(a + b) * c"), "(a + b) * c");
    assert_eq!(norm("a + (b * c)"), "a + b * c");
    assert_eq!(norm("((a))"), "a");
    assert_eq!(norm("(a & b) | c"), "a & b | c");
    assert_eq!(norm("a & (b | c)"), "a & (b | c)");
}

#[test]
fn left_associativity() {
    assert_eq!(
        parse("a - b - c").unwrap(),
        bin(BinOp::Sub, bin(BinOp::Sub, id("a"), id("b")), id("c"))
    );
    assert_eq!(
        parse("a / b / c").unwrap(),
        bin(BinOp::Div, bin(BinOp::Div, id("a"), id("b")), id("c"))
    );
    assert_eq!(norm("a - (b - c)"), "a - (b - c)");
    assert_eq!(norm("(a - b) - c"), "a - b - c");
    assert_eq!(norm("a / (b * c)"), "a / (b * c)");
    assert_eq!(norm("a * b / c"), "a * b / c");
}

#[test]
fn unary_minus() {
    assert_eq!(parse("-a").unwrap(), Expr::Neg(Box::new(id("a"))));
    // Unary minus binds tighter than everything.
    assert_eq!(
        parse("-a * b").unwrap(),
        bin(BinOp::Mul, Expr::Neg(Box::new(id("a"))), id("b"))
    );
    assert_eq!(
        parse("2 * -3").unwrap(),
        bin(BinOp::Mul, num(2.0), Expr::Neg(Box::new(num(3.0))))
    );
    assert_eq!(
        parse("- -a").unwrap(),
        Expr::Neg(Box::new(Expr::Neg(Box::new(id("a")))))
    );
    assert_eq!(norm("-(a + b)"), "-(a + b)");
    assert_eq!(norm("a - -b"), "a - -b");
    assert_eq!(norm("-a - b"), "-a - b");
}

#[test]
fn minus_between_names_is_subtraction() {
    assert_eq!(parse("a-b").unwrap(), bin(BinOp::Sub, id("a"), id("b")));
    assert_eq!(
        parse("INST_RETIRED.ANY-1").unwrap(),
        bin(BinOp::Sub, id("INST_RETIRED.ANY"), num(1.0))
    );
}

#[test]
fn conditionals() {
    let e = parse("a if #smt_on else b").unwrap();
    assert_eq!(
        e,
        Expr::If {
            then: Box::new(id("a")),
            cond: Box::new(Expr::Const("smt_on".into())),
            otherwise: Box::new(id("b"))
        }
    );
    // The then-value and condition are whole expressions.
    assert_eq!(norm("a + b if c > 1 else d"), "a + b if c > 1 else d");
    // Chained in the else branch.
    let e = parse("a if c else b if d else e").unwrap();
    match e {
        Expr::If { otherwise, .. } => assert!(matches!(*otherwise, Expr::If { .. })),
        _ => panic!("not an if"),
    }
    assert_eq!(
        norm("a if c else b if d else e"),
        "a if c else b if d else e"
    );
    // Nested elsewhere it must be parenthesized, and Display keeps the parentheses.
    assert_eq!(norm("1 + (a if c else b)"), "1 + (a if c else b)");
    assert_eq!(
        norm("(X / 2 * (1 + Y / Z) if #core_wide < 1 else (W / 2 if #SMT_on else V))"),
        "X / 2 * (1 + Y / Z) if #core_wide < 1 else W / 2 if #SMT_on else V"
    );
    assert_eq!(
        norm("(a if c else b) if d else e"),
        "(a if c else b) if d else e"
    );
    assert_eq!(norm("min(a if c else b, 1)"), "min((a if c else b), 1)");
    // if without else
    let (pos, msg) = err("a if b");
    assert_eq!(pos, 6);
    assert!(msg.contains("expected 'else'"), "{msg}");
    let (_, msg) = err("a else b");
    assert!(msg.contains("'else' without 'if'"), "{msg}");
}

#[test]
fn functions() {
    assert_eq!(
        parse("min(a, b)").unwrap(),
        Expr::Call(Func::Min, Box::new(id("a")), Box::new(id("b")))
    );
    assert_eq!(
        parse("max( a , 0 )").unwrap(),
        Expr::Call(Func::Max, Box::new(id("a")), Box::new(num(0.0)))
    );
    assert_eq!(
        parse("d_ratio(x, y)").unwrap(),
        Expr::Call(Func::DRatio, Box::new(id("x")), Box::new(id("y")))
    );
    assert_eq!(norm("MAX(a,b)"), "max(a, b)");
    assert_eq!(norm("100 * max(0, a - b) / c"), "100 * max(0, a - b) / c");
    let (pos, msg) = err("foo(a, b)");
    assert_eq!(pos, 0);
    assert!(msg.contains("unknown function 'foo'"), "{msg}");
    let (pos, msg) = err("min(a)");
    assert_eq!(pos, 5);
    assert!(msg.contains("two arguments"), "{msg}");
    let (_, msg) = err("max(a, b, c)");
    assert!(msg.contains("two arguments"), "{msg}");
}

#[test]
fn constants() {
    assert_eq!(parse("#SMT_on").unwrap(), Expr::Const("SMT_on".into()));
    assert_eq!(norm("#num_cpus_online * 2"), "#num_cpus_online * 2");
    let e = parse("#smt_on + #Threads + #smt_on").unwrap();
    assert_eq!(e.constants(), vec!["smt_on", "Threads"]);
    let (pos, msg) = err("1 + #");
    assert_eq!(pos, 4);
    assert!(msg.contains("constant name"), "{msg}");
}

#[test]
fn identifiers_and_modifiers() {
    for s in [
        "UOPS_RETIRED.MS:c1:e1",
        "X:retire_latency",
        "EV:ocr_msr_val=0x103b800002",
        "EV:u0xfc",
        "TOPDOWN.SLOTS:perf_metrics",
        "ls_not_halted_cyc",
        "_x.y",
        "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM:R",
    ] {
        assert_eq!(parse(s).unwrap(), id(s), "{s}");
        assert_eq!(norm(s), s);
    }
    let e = parse("UOPS_RETIRED.MS:c1:e1 / X:retire_latency - a + UOPS_RETIRED.MS:c1:e1").unwrap();
    assert_eq!(
        e.identifiers(),
        vec!["UOPS_RETIRED.MS:c1:e1", "X:retire_latency", "a"]
    );
    let Expr::Ident(i) = parse("UOPS_RETIRED.MS:c1:e1").unwrap() else {
        panic!()
    };
    assert_eq!(i.base(), "UOPS_RETIRED.MS");
    assert_eq!(i.modifiers().collect::<Vec<_>>(), vec!["c1", "e1"]);
    assert!(!i.is_retire_latency());
    let Expr::Ident(i) = parse("A.B:R").unwrap() else {
        panic!()
    };
    assert!(i.is_retire_latency());
    let Expr::Ident(i) = parse("A.B:Retire_Latency").unwrap() else {
        panic!()
    };
    assert!(i.is_retire_latency());
    // '=' is only allowed inside a modifier.
    assert!(parse("a=b").is_err());
    let (pos, msg) = err("EV: + 1");
    assert_eq!(pos, 2);
    assert!(msg.contains("modifier"), "{msg}");
}

#[test]
fn perf_escapes_are_single_identifiers() {
    let src = r"topdown\-fe\-bound / (topdown\-fe\-bound + topdown\-be\-bound)";
    let e = parse(src).unwrap();
    assert_eq!(
        e.identifiers(),
        vec![r"topdown\-fe\-bound", r"topdown\-be\-bound"]
    );
    assert_eq!(e.to_string(), src);
    let Expr::Ident(i) = parse(r"topdown\-fe\-bound").unwrap() else {
        panic!()
    };
    assert_eq!(i.unescaped(), "topdown-fe-bound");

    let amd = r"cpu@de_no_dispatch_per_slot.no_ops_from_frontend\,cmask\=0x6@";
    assert_eq!(parse(amd).unwrap(), id(amd));
    let Expr::Ident(i) = parse(amd).unwrap() else {
        panic!()
    };
    assert_eq!(
        i.unescaped(),
        "cpu@de_no_dispatch_per_slot.no_ops_from_frontend,cmask=0x6@"
    );
    assert_eq!(
        norm(&format!("6 * {amd} / total_dispatch_slots")),
        format!("6 * {amd} / total_dispatch_slots")
    );
    for s in [
        "msr@tsc@",
        r"cpu_core@IDQ.DSB_UOPS\,cmask\=0x8\,inv\=0x1@",
        r"OCR.DEMAND_RFO.L3_MISS@offcore_rsp\=0x103b800002@",
        r"cstate_core@c6\-residency@",
        r"msr@tsc\,cpu=cpu_core@",
        "cpu@EV,cmask=0x6@",
    ] {
        assert_eq!(parse(s).unwrap(), id(s), "{s}");
    }
    // ':' inside @...@ is not a modifier separator; after it, it is.
    let Expr::Ident(i) = parse(r"cpu@A\,x\=1@:u").unwrap() else {
        panic!()
    };
    assert_eq!(i.base(), r"cpu@A\,x\=1@");
    assert_eq!(i.modifiers().collect::<Vec<_>>(), vec!["u"]);
    let (pos, msg) = err("1 + cpu@EV");
    assert_eq!(pos, 7);
    assert!(msg.contains("closing '@'"), "{msg}");
    let (_, msg) = err(r"a\");
    assert!(msg.contains("backslash"), "{msg}");
}

#[test]
fn error_positions_and_caret() {
    let e = parse("a + * b").unwrap_err();
    assert_eq!(e.pos, 4);
    assert!(e.message.contains("found '*'"), "{}", e.message);
    assert_eq!(
        e.to_string(),
        format!("{} (at byte 4)\n  a + * b\n      ^", e.message)
    );

    let (pos, msg) = err("(a + b");
    assert_eq!((pos, msg.contains("expected ')'")), (6, true), "{msg}");
    let (pos, msg) = err("a + b)");
    assert_eq!((pos, msg.as_str()), (5, "unmatched ')'"));
    let (pos, msg) = err("a >= b");
    assert_eq!(pos, 2);
    assert!(msg.contains("only '<' and '>'"), "{msg}");
    let (pos, msg) = err("a && b");
    assert_eq!(pos, 2);
    assert!(msg.contains("use '&'"), "{msg}");
    let (pos, _) = err("a == b");
    assert_eq!(pos, 2);
    let (pos, msg) = err("a $ b");
    assert_eq!((pos, msg.as_str()), (2, "unexpected character '$'"));
    let (pos, msg) = err("12abc");
    assert_eq!(pos, 0);
    assert!(msg.contains("malformed number"), "{msg}");
    let (_, msg) = err("");
    assert_eq!(msg, "empty formula");
    let (_, msg) = err("   ");
    assert_eq!(msg, "empty formula");
    let (pos, _) = err("a b");
    assert_eq!(pos, 2);
    // Caret counts characters, not bytes.
    let e = parse("é + ").unwrap_err();
    assert!(e.to_string().ends_with("\n  é + \n  ^"), "{e}");
    let e = parse("a + é").unwrap_err();
    assert_eq!(e.pos, 4);
    assert!(e.to_string().ends_with("\n  a + é\n      ^"), "{e}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    let (_, msg) = err(&deep);
    assert!(msg.contains("nested deeper"), "{msg}");
    let deep = format!("{}a", "-".repeat(10_000));
    let (_, msg) = err(&deep);
    assert!(msg.contains("nested deeper"), "{msg}");
    // A long flat chain is fine up to the height limit, then a clean error.
    let flat = vec!["a"; 900].join(" + ");
    assert!(parse(&flat).is_ok());
    let flat = vec!["a"; 100_000].join(" + ");
    let (_, msg) = err(&flat);
    assert!(msg.contains("too deeply nested"), "{msg}");
    let ok = format!("{}a{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(parse(&ok).unwrap(), id("a"));
}

#[test]
fn real_formulas_round_trip() {
    for src in [
        "100 * ( a / ( a + b + c + d ) - e / ( f ) )",
        "perf_metrics.frontend_bound / ( perf_metrics.frontend_bound + perf_metrics.bad_speculation + perf_metrics.retiring + perf_metrics.backend_bound ) - int_misc.uop_dropping / tma_info_thread_slots",
        "( metric_a > 20 ) & ( metric_b > 20 )",
        "( exe_activity.exe_bound_0_ports + max( rs.empty_resource - resource_stalls.scoreboard , 0 ) ) / tma_info_thread_clks * ( cycle_activity.stalls_total - exe_activity.bound_on_loads ) / tma_info_thread_clks",
        "(CPU_CLK_UNHALTED.THREAD / 2 * (1 + CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE / CPU_CLK_UNHALTED.REF_XCLK) if #core_wide < 1 else (CPU_CLK_UNHALTED.THREAD_ANY / 2 if #SMT_on else tma_info_thread_clks))",
        "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM * MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM:R * (1 + MEM_LOAD_RETIRED.FB_HIT / MEM_LOAD_RETIRED.L1_MISS / 2) / tma_info_thread_clks",
        "d_ratio(ex_ret_brn_misp, ex_ret_brn_misp + resyncs_or_nc_redirects)",
    ] {
        norm(src);
    }
}

/// SplitMix64 for the randomized round-trip tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_expr(r: &mut Rng, depth: u32) -> Expr {
    const OPS: [BinOp; 10] = [
        BinOp::Or,
        BinOp::Xor,
        BinOp::And,
        BinOp::Lt,
        BinOp::Gt,
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
    ];
    const IDS: [&str; 6] = [
        "a",
        "UOPS_RETIRED.MS:c1:e1",
        r"topdown\-fe\-bound",
        r"cpu@EV\,cmask\=0x6@",
        "X:retire_latency",
        "EV:ocr_msr_val=0x103b800002",
    ];
    let leaf = depth == 0 || r.below(4) == 0;
    if leaf {
        return match r.below(3) {
            0 => Expr::Num([0.0, 1.0, 2.5, 1e9, 0.001, 123456.0][r.below(6) as usize]),
            1 => Expr::Const(["smt_on", "SMT_on", "core_wide"][r.below(3) as usize].into()),
            _ => id(IDS[r.below(IDS.len() as u64) as usize]),
        };
    }
    let sub = |r: &mut Rng| Box::new(random_expr(r, depth - 1));
    match r.below(5) {
        0 => Expr::Neg(sub(r)),
        1 => Expr::If {
            then: sub(r),
            cond: sub(r),
            otherwise: sub(r),
        },
        2 => Expr::Call(
            [Func::Min, Func::Max, Func::DRatio][r.below(3) as usize],
            sub(r),
            sub(r),
        ),
        _ => Expr::Bin(OPS[r.below(10) as usize], sub(r), sub(r)),
    }
}

#[test]
fn random_trees_print_and_parse_back_identically() {
    let mut r = Rng(7);
    for _ in 0..3000 {
        let e = random_expr(&mut r, 6);
        let text = e.to_string();
        let back = parse(&text).unwrap_or_else(|err| panic!("{text}: {err}"));
        assert_eq!(back, e, "{text}");
        // Normalized text is a fixed point.
        assert_eq!(back.to_string(), text);
    }
}

#[test]
fn random_garbage_never_panics() {
    let alphabet: Vec<char> = "ab_.:=@\\#()+-*/%<>&|^, 019eE?if elseminmaxd_ratioé\t"
        .chars()
        .collect();
    let mut r = Rng(11);
    for _ in 0..20_000 {
        let len = r.below(40) as usize;
        let s: String = (0..len)
            .map(|_| alphabet[r.below(alphabet.len() as u64) as usize])
            .collect();
        if let Err(e) = parse(&s) {
            assert!(e.pos <= s.len(), "{s:?}: {e:?}");
            let _ = e.to_string();
        }
    }
}

/// Straightforward reference semantics over the AST: `None` is "no value" (x/0); NaN (from
/// inf - inf and the like) always propagates, as the engine documents.
fn reference(e: &Expr, vals: &HashMap<String, f64>, smt: f64) -> Option<f64> {
    let t = |x: f64| x != 0.0;
    let b = |x: bool| if x { 1.0 } else { 0.0 };
    Some(match e {
        Expr::Num(n) => *n,
        Expr::Const(c) => match c.to_ascii_lowercase().as_str() {
            "smt_on" => smt,
            "core_wide" => 1.0,
            _ => return None,
        },
        Expr::Ident(i) => vals[&i.unescaped()],
        Expr::Neg(a) => -reference(a, vals, smt)?,
        Expr::Bin(op, x, y) => {
            let (x, y) = (reference(x, vals, smt)?, reference(y, vals, smt)?);
            if x.is_nan() || y.is_nan() {
                return Some(f64::NAN);
            }
            match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x * y,
                BinOp::Div if y == 0.0 => return None,
                BinOp::Div => x / y,
                BinOp::Rem if y as i64 == 0 => return None,
                BinOp::Rem => ((x as i64).wrapping_rem(y as i64)) as f64,
                BinOp::Lt => b(x < y),
                BinOp::Gt => b(x > y),
                BinOp::And => b(t(x) && t(y)),
                BinOp::Or => b(t(x) || t(y)),
                BinOp::Xor => b(t(x) != t(y)),
            }
        }
        Expr::If {
            then,
            cond,
            otherwise,
        } => {
            let c = reference(cond, vals, smt)?;
            if c.is_nan() {
                return Some(f64::NAN);
            }
            if t(c) {
                reference(then, vals, smt)?
            } else {
                reference(otherwise, vals, smt)?
            }
        }
        Expr::Call(f, x, y) => {
            let (x, y) = (reference(x, vals, smt)?, reference(y, vals, smt)?);
            if x.is_nan() || y.is_nan() {
                return Some(f64::NAN);
            }
            match f {
                Func::Min => x.min(y),
                Func::Max => x.max(y),
                Func::DRatio if y == 0.0 => 0.0,
                Func::DRatio => x / y,
            }
        }
    })
}

#[test]
fn engine_agrees_with_a_reference_interpreter_on_random_formulas() {
    let vals: HashMap<String, f64> = [
        ("a", 3.0),
        ("UOPS_RETIRED.MS:c1:e1", 0.0),
        ("topdown-fe-bound", 1e9),
        ("cpu@EV,cmask=0x6@", -2.5),
        ("X:retire_latency", 17.25),
        ("EV:ocr_msr_val=0x103b800002", 0.001),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut checked = [0usize; 3];
    for seed in [99, 1, 2] {
        let mut r = Rng(seed);
        for _ in 0..700 {
            let e = random_expr(&mut r, 5);
            let formula: &'static str = Box::leak(e.to_string().into_boxed_str());
            let metrics: &'static [MetricDef] = Box::leak(Box::new([MetricDef {
                name: "M",
                formula,
                description: "",
                unit: Unit::Number,
                group: "Thread",
                perf_groups: "",
            }]));
            let model = Model {
                key: "random",
                name: "random",
                vendor: Vendor::Intel,
                core_kind: CoreKind::Uniform,
                pmu: "cpu",
                source: "test",
                tma_version: None,
                slots_per_cycle: 4,
                gp_counters: 4,
                fixed_counters: 3,
                topdown: Topdown::Generic,
                events: &[],
                nodes: &[],
                metrics,
                retire_latencies: &[],
            };
            for smt in [false, true] {
                let consts = Constants {
                    smt_on: smt,
                    ..Constants::default()
                };
                let want = reference(&e, &vals, if smt { 1.0 } else { 0.0 });
                let (got, status) = evaluate_metric(&model, "M", &vals, &consts)
                    .unwrap()
                    .unwrap();
                match want {
                    None => {
                        assert_eq!(status, Status::DivisionByZero, "{formula}");
                        assert_eq!(got, None);
                        checked[0] += 1;
                    }
                    Some(w) if w.is_finite() => {
                        assert_eq!(status, Status::Ok, "{formula}");
                        assert_eq!(got.unwrap().to_bits(), w.to_bits(), "{formula}");
                        checked[1] += 1;
                    }
                    Some(_) => {
                        assert!(matches!(status, Status::Error(_)), "{formula}: {status:?}");
                        assert_eq!(got, None);
                        checked[2] += 1;
                    }
                }
            }
        }
    }
    // The generator reaches the interesting outcomes.
    assert!(checked[0] > 50 && checked[1] > 1000, "{checked:?}");
}

use super::*;

fn push(t: &mut Timeline, i: usize, fe: f64, be: f64) {
    let nodes = [
        ("Frontend_Bound", None, 1u8, Some(fe)),
        ("Backend_Bound", None, 1, Some(be)),
        ("Memory_Bound", Some("Backend_Bound"), 2, Some(be * 0.75)),
        ("Core_Bound", Some("Backend_Bound"), 2, Some(be * 0.25)),
    ];
    let path = vec!["Backend_Bound".to_string(), "Memory_Bound".to_string()];
    t.push(i as f64, i as f64 + 1.0, nodes, &path);
}

#[test]
fn a_long_run_keeps_at_most_max_columns_and_the_means() {
    let mut t = Timeline::new();
    for i in 0..5000 {
        push(&mut t, i, 10.0, if i < 2500 { 40.0 } else { 60.0 });
    }
    let cols = t.columns();
    assert!(
        cols.len() <= Timeline::MAX_COLUMNS,
        "{} columns",
        cols.len()
    );
    assert_eq!(cols.iter().map(|c| c.n as usize).sum::<usize>(), 5000);
    assert_eq!(cols.first().unwrap().start_s, 0.0);
    assert_eq!(cols.last().unwrap().end_s, 5000.0);
    // The mean over all columns, weighted, is the mean of the intervals: 50.
    let be = t
        .nodes
        .iter()
        .position(|k| k.name == "Backend_Bound")
        .unwrap();
    let sum: f64 = cols
        .iter()
        .map(|c| c.values[be].unwrap() * f64::from(c.n))
        .sum();
    assert!((sum / 5000.0 - 50.0).abs() < 1e-9);
    assert_eq!(t.intervals(), 5000);
}

#[test]
fn a_short_run_is_drawn_interval_by_interval() {
    let mut t = Timeline::new();
    for i in 0..1000 {
        push(&mut t, i, 10.0, 40.0);
    }
    assert_eq!(t.columns().len(), 1000);
    assert!(t.columns().iter().all(|c| c.n == 1));
}

#[test]
fn the_second_panel_shows_the_bottlenecks_measured_children() {
    let mut t = Timeline::new();
    push(&mut t, 0, 10.0, 40.0);
    assert_eq!(t.bottleneck(), ["Backend_Bound", "Memory_Bound"]);
    // Memory_Bound has no children here: its parent's are drawn.
    assert_eq!(t.drill_node().as_deref(), Some("Backend_Bound"));
    assert_eq!(
        t.panels(),
        [Panel::Level1, Panel::ChildrenOf("Backend_Bound".into())]
    );
    let kids: Vec<&str> = t
        .panel_series(&Panel::ChildrenOf("Backend_Bound".into()))
        .into_iter()
        .map(|i| t.nodes[i].name.as_str())
        .collect();
    assert_eq!(kids, ["Memory_Bound", "Core_Bound"]);
    // No node of the children's panel shares a colour with a level-1 node.
    let mut colours = Vec::new();
    for panel in t.panels() {
        for k in 0..t.panel_series(&panel).len() {
            colours.push(t.series_color_in(&panel, k));
        }
    }
    let mut distinct = colours.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), colours.len(), "{colours:?}");
}

#[test]
fn svg_names_every_series_and_escapes_text() {
    let mut t = Timeline::new();
    for i in 0..20 {
        push(&mut t, i, 10.0 + i as f64, 40.0);
    }
    let svg = t.svg().unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
    for name in [
        "Frontend_Bound",
        "Backend_Bound",
        "Memory_Bound",
        "Core_Bound",
    ] {
        assert!(svg.contains(name), "{name} missing");
    }
    let bars = [Bar {
        name: "A<&>B".into(),
        level: 1,
        value: Some(30.0),
        threshold: Some(20.0),
        above_threshold: Some(true),
        on_path: true,
        note: String::new(),
    }];
    let svg = tree_svg("t", &bars).unwrap();
    assert!(svg.contains("A&lt;&amp;&gt;B"), "{svg}");
    assert!(!svg.contains("A<&>B"));
}

#[test]
fn own_threshold_reads_the_clause_about_the_node() {
    assert_eq!(
        own_threshold("Memory_Bound", "Memory_Bound > 20 & Backend_Bound > 20"),
        Some(20.0)
    );
    assert_eq!(
        own_threshold("Backend_Bound", "Memory_Bound > 20 & Backend_Bound > 20"),
        Some(20.0)
    );
    assert_eq!(
        own_threshold("Fetch_Latency", "Fetch_Latency > 10 & Frontend_Bound > 15"),
        Some(10.0)
    );
    assert_eq!(own_threshold("X", "Y > 3"), None);
    assert_eq!(own_threshold("X", ""), None);
}

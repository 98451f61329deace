//! How perf's human-readable output wrote its numbers: perf prints counts with the locale's
//! thousands separator (`%'18.0f`) and every fraction with its decimal point, so a run made
//! under `LANG=de_DE.UTF-8` reads `557.024.381 cycles` and `129,06 msec task-clock`, one under
//! `fr_FR` `4 895 089 444 cycles` (a space, U+00A0 or U+202F between the groups).
//!
//! One number can be ambiguous (`1.088` is 1088 in a German file and 1.088 in an English
//! one), a file rarely is: [`Evidence`] weighs every number of a look-ahead window by what
//! perf prints in each place, and [`NumberFormat`] then reads every number the same way.

/// Characters perf's locales put between groups of thousands, besides `.` and `,`.
const GROUP_SPACES: &[char] = &[' ', '\u{a0}', '\u{202f}', '\u{2009}'];
const APOSTROPHES: &[char] = &['\'', '\u{2019}'];
/// What [`join_groups`] puts where a space separated two groups of a count.
pub(super) const GROUP_MARK: char = '_';

/// The number format of one recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberFormat {
    /// `.` or `,`.
    pub decimal: char,
    /// What separates the groups of thousands in counts: `,`, `.`, a space-like character
    /// or an apostrophe; `None` where no grouped count was seen.
    pub thousands: Option<char>,
}

impl Default for NumberFormat {
    fn default() -> Self {
        NumberFormat {
            decimal: '.',
            thousands: None,
        }
    }
}

impl NumberFormat {
    /// Whether this is the C (English) format, which needs no note.
    pub fn is_c(&self) -> bool {
        self.decimal == '.' && matches!(self.thousands, None | Some(','))
    }

    /// A number as perf printed it in this format: `113,357,334`, `0.57`, `1.234.567,5`,
    /// `4 895 089 444`. `None` when it is not one (a group of other than three digits after
    /// a thousands separator, two decimal points, no digits).
    pub fn parse(&self, s: &str) -> Option<f64> {
        if !s.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let mut plain = String::with_capacity(s.len());
        // Digits since the start or the last separator, and whether a thousands one was seen.
        let (mut run, mut grouped, mut seen_decimal) = (0usize, false, false);
        for c in s.chars() {
            if c.is_ascii_digit() {
                plain.push(c);
                run += 1;
            } else if c == self.decimal && !seen_decimal {
                if grouped && run != 3 {
                    return None;
                }
                seen_decimal = true;
                plain.push('.');
            } else if is_separator(c) && !seen_decimal {
                if (grouped && run != 3) || !(1..=3).contains(&run) {
                    return None;
                }
                grouped = true;
                run = 0;
            } else {
                return None;
            }
        }
        if grouped && !seen_decimal && run != 3 {
            return None;
        }
        plain.parse::<f64>().ok().filter(|v| v.is_finite())
    }

    /// Digits after the decimal point (0 without one).
    pub fn decimals(&self, s: &str) -> u8 {
        s.rfind(self.decimal)
            .map_or(0, |i| (s.len() - i - 1).min(12) as u8)
    }
}

impl std::fmt::Display for NumberFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let between = match self.thousands {
            None => String::new(),
            Some(' ') => ", a space between thousands".into(),
            Some('\u{a0}') => ", a no-break space (U+00A0) between thousands".into(),
            Some('\u{202f}') => ", a narrow no-break space (U+202F) between thousands".into(),
            Some('\u{2009}') => ", a thin space (U+2009) between thousands".into(),
            Some(c) => format!(", `{c}` between thousands"),
        };
        let like = match (self.decimal, self.thousands) {
            (',', Some('.')) => " (as de_DE or pt_BR write them)",
            (',', Some(c)) if GROUP_SPACES.contains(&c) => " (as fr_FR writes them)",
            ('.', Some(c)) if APOSTROPHES.contains(&c) => " (as de_CH writes them)",
            _ => "",
        };
        write!(f, "`{}` as the decimal point{between}{like}", self.decimal)
    }
}

fn is_separator(c: char) -> bool {
    c == '.' || c == ',' || c == GROUP_MARK || GROUP_SPACES.contains(&c) || APOSTROPHES.contains(&c)
}

/// Votes for the decimal point from the numbers of a recording. Strong votes come from
/// places perf always prints a fraction (shares, metrics, times, units); weak ones from
/// counts perf prints as whole numbers, whose one separator must then be a thousands one.
#[derive(Debug, Default, Clone)]
pub(super) struct Evidence {
    strong: [u32; 2],
    weak: [u32; 2],
    thousands: Option<char>,
}

fn slot(c: char) -> Option<usize> {
    match c {
        '.' => Some(0),
        ',' => Some(1),
        _ => None,
    }
}

impl Evidence {
    /// The format the votes give: `,` as the decimal point only where it has more votes
    /// (strong ones first), `.` otherwise.
    pub fn decide(&self) -> NumberFormat {
        let votes = if self.strong != [0, 0] {
            self.strong
        } else {
            self.weak
        };
        let decimal = if votes[1] > votes[0] { ',' } else { '.' };
        let thousands = self
            .thousands
            .or_else(|| (votes != [0, 0]).then_some(if decimal == ',' { '.' } else { ',' }));
        NumberFormat { decimal, thousands }
    }

    /// A number perf prints as a fraction, never grouped: its one separator is the point.
    fn fraction(&mut self, s: &str) {
        let s = s.trim().trim_end_matches('%');
        let mut seps = s.chars().filter(|c| matches!(c, '.' | ','));
        if let (Some(c), None) = (seps.next(), seps.next()) {
            if let Some(i) = slot(c) {
                self.strong[i] += 1;
            }
        }
    }

    /// A count: grouped in thousands, with a fraction only where it has a unit.
    fn count(&mut self, s: &str, has_unit: bool) {
        let dots = s.matches('.').count();
        let commas = s.matches(',').count();
        if s.contains(APOSTROPHES) {
            self.thousands = self
                .thousands
                .or_else(|| s.chars().find(|c| APOSTROPHES.contains(c)));
        }
        match (dots, commas) {
            (0, 0) => {}
            // Both: the last one is the point.
            (d, c) if d > 0 && c > 0 => {
                if let Some(i) = s
                    .rfind(['.', ','])
                    .and_then(|i| slot(s[i..].chars().next()?))
                {
                    self.strong[i] += 1;
                    self.thousands.get_or_insert(if i == 0 { ',' } else { '.' });
                }
            }
            // Several of one kind: thousands, so the point is the other.
            (d, 0) if d > 1 => {
                self.strong[1] += 1;
                self.thousands.get_or_insert('.');
            }
            (0, c) if c > 1 => {
                self.strong[0] += 1;
                self.thousands.get_or_insert(',');
            }
            _ => {
                let sep = if dots == 1 { '.' } else { ',' };
                let after = s.len() - s.rfind(sep).unwrap_or(0) - 1;
                let i = usize::from(sep == ',');
                if after != 3 {
                    self.strong[i] += 1;
                } else if !has_unit && !s.contains(GROUP_MARK) && !s.contains(APOSTROPHES) {
                    // A whole count with one separator: a thousands one.
                    self.weak[1 - i] += 1;
                }
            }
        }
    }

    /// Weigh one line of perf's human-readable output.
    pub fn line(&mut self, line: &str) {
        let t = line.trim();
        if t.is_empty() {
            return;
        }
        for suffix in ["seconds time elapsed", "seconds user", "seconds sys"] {
            if let Some(v) = t.strip_suffix(suffix) {
                self.fraction(v);
                return;
            }
        }
        // `(50,02%)` or `( +-  0,12% )` at the end.
        let mut body = t;
        while let Some(open) = body.trim_end().strip_suffix(')').and_then(|b| b.rfind('(')) {
            let inner = body[open + 1..].trim_end().trim_end_matches(')').trim();
            self.fraction(inner.trim_start_matches("+-").trim());
            body = body[..open].trim_end();
        }
        let (counts, metric) = match body.split_once('#') {
            Some((c, m)) => (c, Some(m)),
            None => (body, None),
        };
        if let Some(m) = metric {
            if let Some(v) = m.split_whitespace().next() {
                if v.starts_with(|c: char| c.is_ascii_digit()) {
                    self.fraction(v);
                }
            }
        }
        let (counts, space) = join_groups(counts);
        if let Some(c) = space {
            self.thousands.get_or_insert(c);
        }
        let mut tokens = counts.split_whitespace().peekable();
        let (stamp, count) = leading_columns(&mut tokens);
        if let Some(s) = stamp {
            self.fraction(s);
        }
        let Some(count) = count.filter(|c| c.starts_with(|c: char| c.is_ascii_digit())) else {
            return;
        };
        let has_unit = tokens.peek().is_some_and(|u| super::UNITS.contains(u));
        self.count(count, has_unit);
    }
}

/// The leading columns of a counter row's words: the `-I` time stamp (where a column follows
/// it) and, past the `-A` `CPUn` column, the word that holds the count; `tokens` is left at
/// the word after it.
pub(super) fn leading_columns<'a>(
    tokens: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
) -> (Option<&'a str>, Option<&'a str>) {
    let mut stamp = None;
    let mut word = tokens.next();
    if word.is_some_and(is_stamp) && tokens.peek().is_some() {
        stamp = word;
        word = tokens.next();
    }
    if word.is_some_and(|w| {
        w.strip_prefix("CPU")
            .is_some_and(|n| n.parse::<u32>().is_ok())
    }) {
        word = tokens.next();
    }
    (stamp, word)
}

/// A time stamp of `-I` output: digits, a point, nine digits.
pub(super) fn is_stamp(s: &str) -> bool {
    let Some(pos) = s.rfind(['.', ',']) else {
        return false;
    };
    s.len() - pos - 1 == 9
        && pos > 0
        && s[..pos].bytes().all(|c| c.is_ascii_digit())
        && s[pos + 1..].bytes().all(|c| c.is_ascii_digit())
}

/// Where a count is grouped with spaces, the line with each of those spaces replaced by
/// [`GROUP_MARK`] (which [`NumberFormat::parse`] skips), so that splitting the line at
/// whitespace keeps `4 895 089 444` one token; and the first such space. A space is a group
/// separator where one space-like character stands between a digit and exactly three digits
/// that end at a non-digit. Other no-break spaces become plain ones.
pub(super) fn join_groups(line: &str) -> (std::borrow::Cow<'_, str>, Option<char>) {
    let b = line.as_bytes();
    let needs = line.contains(&GROUP_SPACES[1..])
        || b.windows(5).any(|w| {
            w[0].is_ascii_digit()
                && w[1] == b' '
                && w[2].is_ascii_digit()
                && w[3].is_ascii_digit()
                && w[4].is_ascii_digit()
        });
    if !needs {
        return (std::borrow::Cow::Borrowed(line), None);
    }
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut first = None;
    for (i, &c) in chars.iter().enumerate() {
        let group_sep = GROUP_SPACES.contains(&c)
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.len() >= i + 4
            && chars[i + 1..i + 4].iter().all(char::is_ascii_digit)
            && chars.get(i + 4).is_none_or(|n| !n.is_ascii_digit());
        if group_sep {
            first.get_or_insert(c);
            out.push(GROUP_MARK);
        } else if GROUP_SPACES[1..].contains(&c) {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    (std::borrow::Cow::Owned(out), first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(lines: &[&str]) -> NumberFormat {
        let mut e = Evidence::default();
        for l in lines {
            e.line(l);
        }
        e.decide()
    }

    #[test]
    fn the_whole_file_decides() {
        // pt_BR: the grouped cycles and the msec fraction both say `,` is the point, so the
        // page faults before them are 1088.
        let f = decide(&[
            "            129,06 msec task-clock                       #    0,998 CPUs utilized",
            "             1.088      page-faults                      #    8,430 K/sec",
            "       557.024.381      cycles                           #    4,316 GHz",
        ]);
        assert_eq!(
            f,
            NumberFormat {
                decimal: ',',
                thousands: Some('.')
            }
        );
        assert_eq!(f.parse("1.088"), Some(1088.0));
        assert_eq!(f.parse("557.024.381"), Some(557_024_381.0));
        assert_eq!(f.parse("129,06"), Some(129.06));
        assert!(!f.is_c());
        // C: the same shapes the other way round.
        let c = decide(&[
            "            129.06 msec task-clock                       #    0.998 CPUs utilized",
            "             1,088      page-faults                      #    8.430 K/sec",
        ]);
        assert_eq!(c.decimal, '.');
        assert!(c.is_c());
        assert_eq!(c.parse("1,088"), Some(1088.0));
        // Only whole counts: the separator of each is a thousands one.
        assert_eq!(decide(&["   1.088      page-faults"]).decimal, ',');
        assert_eq!(decide(&["   1,088      page-faults"]).decimal, '.');
        // Nothing to go by: C.
        assert_eq!(
            decide(&["   1088      page-faults"]),
            NumberFormat::default()
        );
    }

    #[test]
    fn space_groups() {
        for sp in [" ", "\u{a0}", "\u{202f}"] {
            let line = format!("     4{sp}895{sp}089{sp}444      cycles      #    3,20 GHz");
            let f = decide(&[&line]);
            assert_eq!(f.decimal, ',', "{line:?}");
            assert_eq!(f.thousands, sp.chars().next());
            let (joined, space) = join_groups(&line);
            assert_eq!(space, sp.chars().next());
            let count = joined.split_whitespace().next().unwrap();
            assert_eq!(f.parse(count), Some(4_895_089_444.0), "{line:?}");
            assert!(f.to_string().contains("between thousands"), "{f}");
        }
        // A time stamp and a count in their own columns stay apart.
        let (l, _) = join_groups("     1.001097825      2 007 000 123      cycles");
        let t: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(t.len(), 3, "{t:?}");
        assert!(is_stamp(t[0]));
    }

    #[test]
    fn malformed_groups_are_not_numbers() {
        let f = NumberFormat::default();
        assert_eq!(f.parse("1,5"), None);
        assert_eq!(f.parse("12,3456"), None);
        assert_eq!(f.parse("1.2.3"), None);
        assert_eq!(f.parse("1,234.5"), Some(1234.5));
        assert_eq!(f.parse("-5"), None);
        assert_eq!(f.parse(""), None);
    }
}

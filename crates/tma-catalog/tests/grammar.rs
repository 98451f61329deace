//! Every formula and threshold of every model must parse under the formula language
//! documented in `src/lib.rs` (the contract with tma-metrics). This is a small, strict
//! recognizer of that grammar, independent of the engine's parser.

use tma_catalog::models;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num,
    Ident(String),
    Const(String),
    Op(char),
    LParen,
    RParen,
    Comma,
    If,
    Else,
    Func,
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        match c {
            ' ' | '\t' => i += 1,
            '(' => {
                out.push(Tok::LParen);
                i += 1
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '&' | '|' | '^' => {
                out.push(Tok::Op(c));
                i += 1
            }
            '#' => {
                let st = i + 1;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let name = s[st..i].to_ascii_lowercase();
                const KNOWN: &[&str] = &[
                    "smt_on",
                    "threads",
                    "core_wide",
                    "num_cpus_online",
                    "num_cores",
                    "num_sockets",
                    "tsc_freq",
                    "duration_time",
                    "chas_per_socket",
                ];
                if !KNOWN.contains(&name.as_str()) {
                    return Err(format!("unknown constant #{name}"));
                }
                out.push(Tok::Const(name));
            }
            _ if c.is_ascii_digit() || c == '.' => {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                if i < b.len() && b[i] == b'e' {
                    i += 1;
                    if i < b.len() && b[i] == b'-' {
                        i += 1;
                    }
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_') {
                    return Err(format!("identifier starting with a digit at {i}"));
                }
                out.push(Tok::Num);
            }
            _ if c.is_ascii_alphabetic() || c == '_' => {
                let st = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                while i + 1 < b.len()
                    && b[i] == b':'
                    && (b[i + 1].is_ascii_alphanumeric() || b[i + 1] == b'_')
                {
                    i += 1;
                    while i < b.len()
                        && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'=')
                    {
                        i += 1;
                    }
                }
                let w = &s[st..i];
                out.push(match w {
                    "if" => Tok::If,
                    "else" => Tok::Else,
                    "min" | "max" | "d_ratio" => Tok::Func,
                    _ => Tok::Ident(w.to_string()),
                });
            }
            _ => return Err(format!("unexpected character `{c}` at {i}")),
        }
    }
    Ok(out)
}

struct P {
    t: Vec<Tok>,
    i: usize,
}

impl P {
    fn peek(&self) -> Option<&Tok> {
        self.t.get(self.i)
    }
    fn eat(&mut self, t: &Tok) -> Result<(), String> {
        if self.peek() == Some(t) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!(
                "expected {t:?} at token {}, got {:?}",
                self.i,
                self.peek()
            ))
        }
    }
    fn if_expr(&mut self) -> Result<(), String> {
        self.expr(0)?;
        if self.peek() == Some(&Tok::If) {
            self.i += 1;
            self.expr(0)?;
            self.eat(&Tok::Else)?;
            self.if_expr()?;
        }
        Ok(())
    }
    fn prec(op: char) -> u8 {
        match op {
            '|' => 1,
            '^' => 2,
            '&' => 3,
            '<' | '>' => 4,
            '+' | '-' => 5,
            _ => 6,
        }
    }
    fn expr(&mut self, min: u8) -> Result<(), String> {
        self.unary()?;
        while let Some(Tok::Op(op)) = self.peek().cloned() {
            let p = Self::prec(op);
            if p < min || p == 0 {
                break;
            }
            self.i += 1;
            self.expr(p + 1)?;
        }
        Ok(())
    }
    fn unary(&mut self) -> Result<(), String> {
        match self.peek().cloned() {
            Some(Tok::Op('-')) => {
                self.i += 1;
                self.unary()
            }
            Some(Tok::Num) | Some(Tok::Ident(_)) | Some(Tok::Const(_)) => {
                self.i += 1;
                Ok(())
            }
            Some(Tok::LParen) => {
                self.i += 1;
                self.if_expr()?;
                self.eat(&Tok::RParen)
            }
            Some(Tok::Func) => {
                self.i += 1;
                self.eat(&Tok::LParen)?;
                self.if_expr()?;
                self.eat(&Tok::Comma)?;
                self.if_expr()?;
                self.eat(&Tok::RParen)
            }
            t => Err(format!("unexpected {t:?} at token {}", self.i)),
        }
    }
}

fn check(s: &str) -> Result<(), String> {
    let mut p = P { t: lex(s)?, i: 0 };
    p.if_expr()?;
    if p.i != p.t.len() {
        return Err(format!("trailing tokens from {}", p.i));
    }
    Ok(())
}

#[test]
fn recognizer_rejects_what_it_should() {
    for bad in [
        "a >= 0",
        "4K_Aliasing > 1",
        "a +",
        "(a",
        "min(a)",
        "a if b",
        "#nope",
    ] {
        assert!(check(bad).is_err(), "{bad}");
    }
    for good in [
        "a if b > 1 else c if d else e",
        "-(a) * 2 ^ 1",
        "d_ratio(X.Y:c1:e1, 1e9)",
        "( ( A:retire_latency < 0 ) ^ 1 )",
    ] {
        assert!(check(good).is_ok(), "{good}: {:?}", check(good));
    }
}

#[test]
fn every_formula_and_threshold_parses() {
    let mut n = 0;
    for m in models() {
        let mut all: Vec<(&str, &str)> = Vec::new();
        for x in m.nodes {
            all.push((x.name, x.formula));
            if !x.threshold.is_empty() {
                all.push((x.name, x.threshold));
            }
        }
        for x in m.metrics {
            all.push((x.name, x.formula));
        }
        for (name, f) in all {
            if let Err(e) = check(f) {
                panic!("{}: {name}: {e}\n  {f}", m.key);
            }
            n += 1;
        }
    }
    assert!(n > 2000, "only {n} expressions");
}

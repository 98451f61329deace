//! The formula language: perf `MetricExpr` grammar (see `tma_catalog` crate docs and
//! `shared/pmu-data/README.md` section 4.1) -> [`Expr`] AST.
//!
//! Grammar (lowest to highest binding):
//! ```text
//! if_expr := expr [ "if" expr "else" if_expr ]        (chains only in the else branch)
//! expr    := expr "|" expr  <  "^"  <  "&"  <  "<" ">"  <  "+" "-"  <  "*" "/" "%"
//!            (all binary operators left associative)
//! unary   := "-" unary | primary
//! primary := number | "#"constant | identifier
//!          | ("min" | "max" | "d_ratio") "(" if_expr "," if_expr ")"
//!          | "(" if_expr ")"
//! ```
//! Identifiers are `[A-Za-z_][A-Za-z0-9_.]*` plus `:modifier` suffixes (`[A-Za-z0-9_=]+`),
//! and, as in perf, backslash escapes (`topdown\-fe\-bound`) and `pmu@spec@` sections
//! (`cpu@EV\,cmask\=0x6@`, `msr@tsc@`). The original text of every identifier is kept.
//! A bare `-` never belongs to an identifier, so `a-b` is a subtraction.
//!
//! Function arguments accept a full `if_expr` (perf only accepts a plain `expr` there),
//! so every formula perf accepts parses here; [`Expr`]'s `Display` parenthesizes a
//! conditional used as an argument so its output stays valid perf syntax.

use std::fmt;

/// Maximum nesting depth (parentheses, unary minus, function calls, conditionals).
/// Deeper input is rejected with a [`ParseError`] instead of risking a stack overflow.
pub const MAX_DEPTH: usize = 200;

/// Maximum height of the AST (a chain `a + b + c ...` of N terms is N high).
pub const MAX_HEIGHT: usize = 1000;

/// A formula parse error: byte offset into the source, message, and the source itself so
/// `Display` can show the formula with a caret under the offending position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the problem in `src`.
    pub pos: usize,
    /// What was wrong and, where possible, what to write instead.
    pub message: String,
    /// The whole formula.
    pub src: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pos = self.pos.min(self.src.len());
        // Column in characters, not bytes, so the caret lines up.
        let col = self
            .src
            .get(..pos)
            .map(|s| s.chars().count())
            .unwrap_or(pos);
        write!(
            f,
            "{} (at byte {})\n  {}\n  {}^",
            self.message,
            self.pos,
            self.src,
            " ".repeat(col)
        )
    }
}

impl std::error::Error for ParseError {}

/// Binary operators. Logical ones treat non-zero as true and give 0 or 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Or,
    Xor,
    And,
    Lt,
    Gt,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    /// Binding power: higher binds tighter.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::Xor => 2,
            BinOp::And => 3,
            BinOp::Lt | BinOp::Gt => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        }
    }
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "|",
            BinOp::Xor => "^",
            BinOp::And => "&",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

/// The two-argument functions of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Func {
    Min,
    Max,
    /// `d_ratio(a, b)`: a / b, or 0 when b is 0.
    DRatio,
}

impl Func {
    /// The function name as written.
    pub fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::DRatio => "d_ratio",
        }
    }
}

/// An identifier as written: an event id (with its modifiers) or a reference to another
/// metric, which only the model can tell apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// Original text, escapes included (`topdown\-fe\-bound`, `UOPS_RETIRED.MS:c1:e1`).
    pub text: String,
}

impl Ident {
    /// The name with perf backslash escapes removed (`topdown\-fe\-bound` ->
    /// `topdown-fe-bound`). Equal to `text` when there are no escapes.
    pub fn unescaped(&self) -> String {
        unescape(&self.text)
    }
    /// Whether the identifier has a retire-latency modifier (`:retire_latency`, perf `:R`).
    pub fn is_retire_latency(&self) -> bool {
        self.modifiers().any(is_retire_latency_modifier)
    }
    /// Base name before the first `:` modifier.
    pub fn base(&self) -> &str {
        split_modifiers(&self.text).0
    }
    /// The `:modifier` suffixes, without the colon.
    pub fn modifiers(&self) -> impl Iterator<Item = &str> {
        let rest = split_modifiers(&self.text).1;
        rest.split(':').filter(|s| !s.is_empty())
    }
}

/// True for `retire_latency` (any case) and perf's `R`.
pub fn is_retire_latency_modifier(m: &str) -> bool {
    m == "R" || m.eq_ignore_ascii_case("retire_latency")
}

/// Split `BASE:m1:m2` into `("BASE", "m1:m2")`, ignoring `:` inside `@...@` or escaped.
fn split_modifiers(text: &str) -> (&str, &str) {
    let b = text.as_bytes();
    let mut i = 0;
    let mut in_at = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'@' => in_at = !in_at,
            b':' if !in_at => return (&text[..i], &text[i + 1..]),
            _ => {}
        }
        i += 1;
    }
    (text, "")
}

/// Remove perf backslash escapes.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Formula AST.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A numeric literal (`NaN` included, as perf allows).
    Num(f64),
    /// `#name` system constant; the name is stored without `#`, as written.
    Const(String),
    /// Event id or metric reference.
    Ident(Ident),
    /// Unary minus.
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `then if cond else otherwise`.
    If {
        then: Box<Expr>,
        cond: Box<Expr>,
        otherwise: Box<Expr>,
    },
    Call(Func, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Identifiers (original text) in order of first appearance, without duplicates.
    pub fn identifiers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Ident(id) = e {
                if !out.contains(&id.text.as_str()) {
                    out.push(&id.text);
                }
            }
        });
        out
    }
    /// `#constants` (without `#`, as written) in order of first appearance, no duplicates.
    pub fn constants(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Const(c) = e {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
        });
        out
    }
    /// Pre-order visit of every sub-expression.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Num(_) | Expr::Const(_) | Expr::Ident(_) => {}
            Expr::Neg(a) => a.walk(f),
            Expr::Bin(_, a, b) | Expr::Call(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::If {
                then,
                cond,
                otherwise,
            } => {
                then.walk(f);
                cond.walk(f);
                otherwise.walk(f);
            }
        }
    }
}

// ---------------------------------------------------------------- Display (normalized)

/// Context precedence: the minimum binding an operand needs to go without parentheses.
const P_TOP: u8 = 0; // whole formula or else-branch: a bare conditional is fine
const P_EXPR: u8 = 1; // then/cond/function argument: conditional needs parentheses
const P_UNARY: u8 = 7;

fn fmt_expr(e: &Expr, ctx: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match e {
        Expr::Num(n) => {
            if n.is_nan() {
                f.write_str("NaN")
            } else {
                write!(f, "{n}")
            }
        }
        Expr::Const(c) => write!(f, "#{c}"),
        Expr::Ident(id) => f.write_str(&id.text),
        Expr::Neg(a) => {
            f.write_str("-")?;
            fmt_expr(a, P_UNARY, f)
        }
        Expr::Bin(op, a, b) => {
            let p = op.precedence();
            let paren = p < ctx;
            if paren {
                f.write_str("(")?;
            }
            fmt_expr(a, p, f)?;
            write!(f, " {} ", op.symbol())?;
            // Left associative: an equal-precedence right operand needs parentheses.
            fmt_expr(b, p + 1, f)?;
            if paren {
                f.write_str(")")?;
            }
            Ok(())
        }
        Expr::If {
            then,
            cond,
            otherwise,
        } => {
            let paren = ctx > P_TOP;
            if paren {
                f.write_str("(")?;
            }
            fmt_expr(then, P_EXPR, f)?;
            f.write_str(" if ")?;
            fmt_expr(cond, P_EXPR, f)?;
            f.write_str(" else ")?;
            fmt_expr(otherwise, P_TOP, f)?;
            if paren {
                f.write_str(")")?;
            }
            Ok(())
        }
        Expr::Call(func, a, b) => {
            write!(f, "{}(", func.name())?;
            fmt_expr(a, P_EXPR, f)?;
            f.write_str(", ")?;
            fmt_expr(b, P_EXPR, f)?;
            f.write_str(")")
        }
    }
}

impl fmt::Display for Expr {
    /// Normalized formula: single spaces around binary operators, only the parentheses
    /// precedence needs, identifiers exactly as written. `parse(x.to_string()) == x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_expr(self, P_TOP, f)
    }
}

// ---------------------------------------------------------------- lexer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Const(String),
    Ident(String),
    If,
    Else,
    Op(BinOp),
    Minus, // '-' is binary or unary; resolved by the parser
    LParen,
    RParen,
    Comma,
    End,
}

struct Lexer<'s> {
    src: &'s str,
    b: &'s [u8],
    i: usize,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'\\'
}
fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.'
}

impl<'s> Lexer<'s> {
    fn err(&self, pos: usize, msg: impl Into<String>) -> ParseError {
        ParseError {
            pos,
            message: msg.into(),
            src: self.src.to_string(),
        }
    }

    /// Next token and its start offset.
    fn next(&mut self) -> Result<(Tok, usize), ParseError> {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
        let start = self.i;
        let Some(&c) = self.b.get(self.i) else {
            return Ok((Tok::End, start));
        };
        let two = self.b.get(self.i + 1).copied();
        let tok = match c {
            b'0'..=b'9' => return self.number(start),
            b'.' if two.is_some_and(|d| d.is_ascii_digit()) => return self.number(start),
            b'#' => {
                self.i += 1;
                let s = self.i;
                while self.i < self.b.len()
                    && (self.b[self.i].is_ascii_alphanumeric() || self.b[self.i] == b'_')
                {
                    self.i += 1;
                }
                if s == self.i {
                    return Err(self.err(start, "expected a constant name after '#'"));
                }
                return Ok((Tok::Const(self.src[s..self.i].to_string()), start));
            }
            c if is_ident_start(c) => return self.ident(start),
            b'+' => Tok::Op(BinOp::Add),
            b'-' => Tok::Minus,
            b'*' => Tok::Op(BinOp::Mul),
            b'/' => Tok::Op(BinOp::Div),
            b'%' => Tok::Op(BinOp::Rem),
            b'<' | b'>' if two == Some(b'=') => {
                return Err(self.err(
                    start,
                    format!(
                        "'{}=' is not in the formula language; only '<' and '>' exist",
                        c as char
                    ),
                ))
            }
            b'<' => Tok::Op(BinOp::Lt),
            b'>' => Tok::Op(BinOp::Gt),
            b'&' if two == Some(b'&') => {
                return Err(self.err(start, "'&&' is not in the formula language; use '&'"))
            }
            b'|' if two == Some(b'|') => {
                return Err(self.err(start, "'||' is not in the formula language; use '|'"))
            }
            b'&' => Tok::Op(BinOp::And),
            b'|' => Tok::Op(BinOp::Or),
            b'^' => Tok::Op(BinOp::Xor),
            b'=' | b'!' => {
                return Err(self.err(
                    start,
                    "'=', '==', '!' and '!=' are not in the formula language (only < > & | ^)",
                ))
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or('?');
                return Err(self.err(start, format!("unexpected character '{ch}'")));
            }
        };
        self.i += 1;
        Ok((tok, start))
    }

    fn number(&mut self, start: usize) -> Result<(Tok, usize), ParseError> {
        let b = self.b;
        let mut i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            let mut j = i + 1;
            if j < b.len() && (b[j] == b'-' || b[j] == b'+') {
                j += 1;
            }
            if j < b.len() && b[j].is_ascii_digit() {
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                i = j;
            }
        }
        if i < b.len() && (is_ident_char(b[i]) || b[i] == b'\\') {
            return Err(self.err(
                start,
                "malformed number (a number may not run into a name; names start with a letter or '_')",
            ));
        }
        let text = &self.src[start..i];
        let v: f64 = text
            .parse()
            .map_err(|_| self.err(start, format!("malformed number '{text}'")))?;
        self.i = i;
        Ok((Tok::Num(v), start))
    }

    fn ident(&mut self, start: usize) -> Result<(Tok, usize), ParseError> {
        let b = self.b;
        let mut i = start;
        let mut in_modifier = false;
        while let Some(&c) = b.get(i) {
            if c == b'\\' {
                // Escape: the next character, whatever it is, is part of the name.
                match self.src[i + 1..].chars().next() {
                    Some(n) => i += 1 + n.len_utf8(),
                    None => return Err(self.err(i, "a backslash must be followed by a character")),
                }
            } else if c == b'@' {
                // pmu@spec@: read to the closing '@'. Escapes are kept; ',', '=', '-' and
                // '/' are accepted raw inside, since the closing '@' ends the name anyway.
                let open = i;
                i += 1;
                loop {
                    match b.get(i) {
                        None => {
                            return Err(self
                                .err(open, "unterminated 'pmu@...@' event: missing closing '@'"))
                        }
                        Some(b'@') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') if i + 1 < b.len() => {
                            i += 1 + self.src[i + 1..].chars().next().map_or(1, char::len_utf8)
                        }
                        Some(&d) if is_ident_char(d) || matches!(d, b',' | b'=' | b'-' | b'/') => {
                            i += 1
                        }
                        Some(_) => {
                            let ch = self.src[i..].chars().next().unwrap_or('?');
                            return Err(self.err(
                                i,
                                format!("unexpected character '{ch}' inside 'pmu@...@' event"),
                            ));
                        }
                    }
                }
            } else if c == b':' {
                match b.get(i + 1) {
                    Some(&d) if d.is_ascii_alphanumeric() || d == b'_' => {
                        in_modifier = true;
                        i += 1;
                    }
                    _ => {
                        return Err(self.err(
                            i,
                            "expected a modifier after ':' (e.g. ':c1', ':retire_latency')",
                        ))
                    }
                }
            } else if is_ident_char(c) || c == b'?' || (in_modifier && c == b'=') {
                i += 1;
            } else {
                break;
            }
        }
        let text = &self.src[start..i];
        self.i = i;
        let tok = match text {
            "if" => Tok::If,
            "else" => Tok::Else,
            "NaN" => Tok::Num(f64::NAN),
            _ => Tok::Ident(text.to_string()),
        };
        Ok((tok, start))
    }
}

// ---------------------------------------------------------------- parser

struct Parser<'s> {
    lx: Lexer<'s>,
    tok: Tok,
    pos: usize,
    depth: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(n) => format!("number {n}"),
        Tok::Const(c) => format!("constant #{c}"),
        Tok::Ident(s) => format!("name '{s}'"),
        Tok::If => "'if'".into(),
        Tok::Else => "'else'".into(),
        Tok::Op(op) => format!("'{}'", op.symbol()),
        Tok::Minus => "'-'".into(),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::End => "end of formula".into(),
    }
}

impl<'s> Parser<'s> {
    fn bump(&mut self) -> Result<(), ParseError> {
        let (t, p) = self.lx.next()?;
        self.tok = t;
        self.pos = p;
        Ok(())
    }
    fn err(&self, msg: impl Into<String>) -> ParseError {
        self.lx.err(self.pos, msg)
    }
    fn expect(&mut self, want: Tok, what: &str) -> Result<(), ParseError> {
        if self.tok == want {
            self.bump()
        } else {
            Err(self.err(format!("expected {what}, found {}", describe(&self.tok))))
        }
    }
    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("formula nested deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    /// Tree height check: every sub-tree stays at most [`MAX_HEIGHT`] high, so the
    /// recursive walks (evaluation, Display, Drop) stay shallow.
    fn height(&self, h: usize) -> Result<usize, ParseError> {
        if h > MAX_HEIGHT {
            return Err(self.err(format!(
                "formula too deeply nested (more than {MAX_HEIGHT} operators in one chain)"
            )));
        }
        Ok(h)
    }

    fn if_expr(&mut self) -> Result<(Expr, usize), ParseError> {
        self.enter()?;
        let (then, ht) = self.binary(1)?;
        let r = if self.tok == Tok::If {
            self.bump()?;
            let (cond, hc) = self.binary(1)?;
            if self.tok != Tok::Else {
                return Err(self.err(format!(
                    "expected 'else' after the condition of 'if', found {}",
                    describe(&self.tok)
                )));
            }
            self.bump()?;
            let (otherwise, ho) = self.if_expr()?;
            let h = self.height(1 + ht.max(hc).max(ho))?;
            (
                Expr::If {
                    then: Box::new(then),
                    cond: Box::new(cond),
                    otherwise: Box::new(otherwise),
                },
                h,
            )
        } else {
            (then, ht)
        };
        self.depth -= 1;
        Ok(r)
    }

    fn cur_binop(&self) -> Option<BinOp> {
        match self.tok {
            Tok::Op(op) => Some(op),
            Tok::Minus => Some(BinOp::Sub),
            _ => None,
        }
    }

    /// Precedence climbing, left associative.
    fn binary(&mut self, min_prec: u8) -> Result<(Expr, usize), ParseError> {
        let (mut lhs, mut h) = self.unary()?;
        while let Some(op) = self.cur_binop() {
            let p = op.precedence();
            if p < min_prec {
                break;
            }
            self.bump()?;
            let (rhs, hr) = self.binary(p + 1)?;
            h = self.height(1 + h.max(hr))?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok((lhs, h))
    }

    fn unary(&mut self) -> Result<(Expr, usize), ParseError> {
        if self.tok == Tok::Minus {
            self.enter()?;
            self.bump()?;
            let (inner, h) = self.unary()?;
            self.depth -= 1;
            return Ok((Expr::Neg(Box::new(inner)), h + 1));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<(Expr, usize), ParseError> {
        let tok = std::mem::replace(&mut self.tok, Tok::End);
        let start = self.pos;
        match tok {
            Tok::Num(n) => {
                self.bump()?;
                Ok((Expr::Num(n), 1))
            }
            Tok::Const(c) => {
                self.bump()?;
                Ok((Expr::Const(c), 1))
            }
            Tok::Ident(name) => {
                self.bump()?;
                if self.tok != Tok::LParen {
                    return Ok((Expr::Ident(Ident { text: name }), 1));
                }
                let func = match name.to_ascii_lowercase().as_str() {
                    "min" => Func::Min,
                    "max" => Func::Max,
                    "d_ratio" => Func::DRatio,
                    _ => {
                        return Err(self.lx.err(
                            start,
                            format!(
                                "unknown function '{name}'; the functions are min, max and d_ratio"
                            ),
                        ))
                    }
                };
                self.bump()?;
                let (a, ha) = self.if_expr()?;
                self.expect(
                    Tok::Comma,
                    &format!("',' ({} takes two arguments)", func.name()),
                )?;
                let (b, hb) = self.if_expr()?;
                self.expect(
                    Tok::RParen,
                    &format!("')' ({} takes two arguments)", func.name()),
                )?;
                let h = self.height(1 + ha.max(hb))?;
                Ok((Expr::Call(func, Box::new(a), Box::new(b)), h))
            }
            Tok::LParen => {
                self.bump()?;
                let e = self.if_expr()?;
                if self.tok != Tok::RParen {
                    return Err(self.err(format!(
                        "expected ')' to close the '(' at byte {start}, found {}",
                        describe(&self.tok)
                    )));
                }
                self.bump()?;
                Ok(e)
            }
            other => {
                self.tok = other;
                Err(self.err(format!(
                    "expected a number, name, constant or '(', found {}",
                    describe(&self.tok)
                )))
            }
        }
    }
}

/// Parse one formula or threshold.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    let mut p = Parser {
        lx: Lexer {
            src,
            b: src.as_bytes(),
            i: 0,
        },
        tok: Tok::End,
        pos: 0,
        depth: 0,
    };
    p.bump()?;
    if p.tok == Tok::End {
        return Err(p.err("empty formula"));
    }
    let (e, _) = p.if_expr()?;
    if p.tok != Tok::End {
        let msg = match p.tok {
            Tok::RParen => "unmatched ')'".to_string(),
            Tok::Else => "'else' without 'if'".to_string(),
            _ => format!(
                "expected an operator or end of formula, found {}",
                describe(&p.tok)
            ),
        };
        return Err(p.err(msg));
    }
    Ok(e)
}

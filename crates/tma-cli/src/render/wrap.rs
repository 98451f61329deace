//! Word wrapping for long descriptions and formulas.

/// Wrap `text` to `width` columns; every line starts with `indent`. Breaks at spaces; a
/// word longer than the line stays whole on its own line.
pub fn wrap(text: &str, indent: &str, width: usize) -> Vec<String> {
    let avail = width.saturating_sub(indent.len()).max(20);
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > avail {
            lines.push(format!("{indent}{cur}"));
            cur.clear();
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(format!("{indent}{cur}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_with_indent() {
        let l = wrap("aaa bbb ccc ddd eee fff ggg hhh iii jjj kkk", "  ", 24);
        assert_eq!(
            l,
            ["  aaa bbb ccc ddd eee", "  fff ggg hhh iii jjj", "  kkk"]
        );
    }

    #[test]
    fn long_word_stays_whole() {
        let w = "x".repeat(50);
        assert_eq!(wrap(&w, "", 30), vec![w]);
    }
}

//! Text from the database made safe to print on a terminal: job types,
//! queue and schedule names, runner names and handler errors are written
//! by applications and handlers, and an escape sequence among them would
//! otherwise move the cursor, recolour or rewrite the operator's screen.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character (C0, DEL, C1) and every Unicode
/// direction override shown as an escape (`\u{1b}`, `\n`, `\t`), so that it
/// prints as one line of visible characters.
pub(crate) fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn plain_text_is_left_alone() {
        assert!(matches!(
            shown("email.send — ok"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escapes_and_line_breaks_print_as_visible_text() {
        assert_eq!(shown("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("one\ntwo\tthree\r"), "one\\ntwo\\tthree\\r");
        assert_eq!(shown("\u{9b}31m\u{7f}"), "\\u{9b}31m\\u{7f}");
        assert_eq!(shown("abc\u{202e}fed"), "abc\\u{202e}fed");
    }
}

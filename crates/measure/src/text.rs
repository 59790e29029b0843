//! Text that may have come from elsewhere, made safe to show: the one rule for which
//! characters never reach a terminal, a Markdown table or a CSV cell as themselves.
//!
//! A run's strings (label, host, parameters, notes, warnings, failure reasons) can arrive
//! from another machine through `import`, `pull` or `push`, from a file someone crafted, or
//! from a reference tool's output. Printed raw, an escape sequence recolours or clears the
//! terminal, an OSC 8 sequence turns text into a hidden hyperlink, BEL rings, a carriage
//! return or a line break forges table rows, and a right-to-left override (U+202E) shows
//! `exe.txt` for `txt.exe`. So every writer for people escapes them ([`escape`], one line;
//! [`escape_prose`], keeping line breaks where a text may span lines), and the store refuses
//! runs that carry them ([`find_unsafe`]) at its door.
//!
//! Unsafe are: every control character (C0, DEL, C1 — U+009B is a one-byte CSI), the
//! Unicode format characters that are invisible or reorder text (soft hyphen, zero-width
//! space and joiners, the bidirectional marks, embeddings, overrides and isolates U+202A–E
//! and U+2066–9, word joiner and invisible operators, the byte order mark, interlinear
//! annotation, tags) and the line and paragraph separators U+2028/9, which some terminals
//! and editors break lines at. Escapes are written the way Rust writes them (`\n`, `\t`,
//! `\r`, `\u{1b}`), visible and unambiguous enough to tell what was there.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not be shown as itself (see the module documentation for the list).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `c` as an escape: `\n`, `\r`, `\t`, or `\u{hex}`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_where(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as one line safe to show: every unsafe character escaped, line breaks and tabs
/// included. Borrows when there is nothing to escape.
///
/// ```
/// use schedlab_measure::text::escape;
/// assert_eq!(escape("base"), "base");
/// assert_eq!(escape("a\nb\x1b[2J\u{202e}"), "a\\nb\\u{1b}[2J\\u{202e}");
/// ```
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, |_| false)
}

/// `s` safe to show as text that may span lines: like [`escape`] but line feeds and tabs
/// are kept (a carriage return, which overwrites the line, is escaped).
pub fn escape_prose(s: &str) -> Cow<'_, str> {
    escape_where(s, is_prose_space)
}

fn is_prose_space(c: char) -> bool {
    c == '\n' || c == '\t'
}

/// The first unsafe character of `s`, if any; with `prose`, line feeds and tabs are allowed
/// (a failure reason or a warning's message may span lines).
pub fn find_unsafe(s: &str, prose: bool) -> Option<char> {
    s.chars().find(|&c| is_unsafe(c) && !(prose && is_prose_space(c)))
}

/// Whether `s` shows nothing: every character is white space, unsafe, takes no column
/// (a combining mark alone) or is one of the fillers that look blank (the Hangul fillers,
/// the blank Braille pattern). Such a label or host cannot be read or told apart.
pub fn is_blank(s: &str) -> bool {
    use unicode_width::UnicodeWidthChar;
    s.chars().all(|c| {
        c.is_whitespace()
            || is_unsafe(c)
            || c.width().unwrap_or(0) == 0
            || matches!(c, '\u{115F}' | '\u{1160}' | '\u{2800}' | '\u{3164}' | '\u{FFA0}')
    })
}

/// `c` named for an error message: `U+001B`, with a word for the common ones.
pub fn describe(c: char) -> String {
    let what = match c {
        '\u{1b}' => " (escape)",
        '\u{07}' => " (bell)",
        '\n' => " (line feed)",
        '\r' => " (carriage return)",
        '\t' => " (tab)",
        '\u{9b}' => " (CSI)",
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' => {
            " (bidirectional control)"
        }
        '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' => " (zero-width)",
        _ => "",
    };
    format!("U+{:04X}{what}", c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_zero_width_are_unsafe_and_ordinary_text_is_not() {
        for c in ['\x1b', '\x07', '\n', '\r', '\t', '\0', '\x7f', '\u{9b}', '\u{85}'] {
            assert!(is_unsafe(c), "{c:?}");
        }
        for c in ('\u{202A}'..='\u{202E}').chain('\u{2066}'..='\u{2069}') {
            assert!(is_unsafe(c), "{c:?}");
        }
        for c in ['\u{200B}', '\u{200D}', '\u{FEFF}', '\u{2028}', '\u{E0041}', '\u{AD}'] {
            assert!(is_unsafe(c), "{c:?}");
        }
        for s in ["os.pipe.latency", "µs ± 2%", "東京", "café", "x=1,y=-2", "naïve ✓"] {
            assert_eq!(find_unsafe(s, false), None, "{s}");
            assert!(matches!(escape(s), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn escaping_makes_every_unsafe_character_visible() {
        let hostile = "a\x1b]8;;http://x\x07b\x1b]8;;\x07\r\n\u{202e}c\u{9b}";
        let e = escape(hostile);
        assert!(e.chars().all(|c| !is_unsafe(c)), "{e:?}");
        assert_eq!(e, "a\\u{1b}]8;;http://x\\u{7}b\\u{1b}]8;;\\u{7}\\r\\n\\u{202e}c\\u{9b}");
        assert_eq!(escape_prose("line 1\n\tline 2\r\x1b"), "line 1\n\tline 2\\r\\u{1b}");
    }

    #[test]
    fn prose_may_break_lines_and_a_line_may_not() {
        assert_eq!(find_unsafe("a\nb", false), Some('\n'));
        assert_eq!(find_unsafe("a\nb\tc", true), None);
        assert_eq!(find_unsafe("a\nb\x1b", true), Some('\x1b'));
        assert_eq!(describe('\x1b'), "U+001B (escape)");
        assert_eq!(describe('\u{202e}'), "U+202E (bidirectional control)");
    }

    #[test]
    fn a_text_of_only_invisible_characters_is_blank() {
        for s in ["", " ", "\u{200b}\u{200b}", "\u{3164}", "\u{301}", "\u{2800} \u{feff}"] {
            assert!(is_blank(s), "{s:?}");
        }
        for s in ["a", "\u{200b}a", "東", "-"] {
            assert!(!is_blank(s), "{s:?}");
        }
    }
}

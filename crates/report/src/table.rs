//! A small table builder shared by the terminal and Markdown renderings.
//!
//! Widths are counted in terminal columns (Unicode width: `µ` and `±` take one, a CJK host
//! name two, a combining accent none), so the terminal columns line up. Markdown escapes the `|` that would otherwise split a cell.
//!
//! Every cell and heading is escaped as it enters ([`schedlab_measure::text::escape`]): a
//! label, host or failure reason from another machine's run cannot send an escape sequence
//! to the terminal nor forge a row with a line break, in any table of any command.

use schedlab_measure::text::escape;
use unicode_width::UnicodeWidthStr;

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// A table of text cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|c| escape(c.0).into_owned()).collect(),
            aligns: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row, its cells escaped; missing cells are empty, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells: Vec<String> = cells.into_iter().map(escape_owned).collect();
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The cells of row `i`.
    pub fn cells(&self, i: usize) -> &[String] {
        &self.rows[i]
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.width()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.width());
            }
        }
        w
    }

    fn pad(cell: &str, width: usize, align: Align) -> String {
        let fill = " ".repeat(width.saturating_sub(cell.width()));
        match align {
            Align::Left => format!("{cell}{fill}"),
            Align::Right => format!("{fill}{cell}"),
        }
    }

    /// One rendered terminal line for `cells` (escaped), padded to this table's widths. Used
    /// to print rows one at a time as results arrive.
    pub fn terminal_line(&self, cells: &[String], widths: &[usize]) -> String {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .zip(&self.aligns)
            .map(|((c, &w), &a)| Table::pad(&escape(c), w, a))
            .collect();
        parts.join("  ").trim_end().to_string()
    }

    /// Plain aligned columns with a rule under the header.
    pub fn to_terminal(&self) -> String {
        let w = self.widths();
        let mut out = String::new();
        out.push_str(&self.terminal_line(&self.headers, &w));
        out.push('\n');
        let rule: Vec<String> = w.iter().map(|&n| "─".repeat(n)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&self.terminal_line(r, &w));
            out.push('\n');
        }
        out
    }

    /// A GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        out.push_str(&format!(
            "| {} |\n",
            self.headers.iter().map(|h| esc(h)).collect::<Vec<_>>().join(" | ")
        ));
        let rule: Vec<&str> =
            self.aligns.iter().map(|a| if *a == Align::Right { "---:" } else { "---" }).collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }

    /// An HTML `<table>` (every cell escaped), with number columns right-aligned and
    /// the header cells clickable for sorting when the page has its script. `extra` adds a
    /// column of trusted HTML per row (a plot): its heading, its cells, and the index of the
    /// column it goes before, named on the table as `pK` (the K-th column, counted from 1).
    ///
    /// A body row's cells leave out their end tags (`</td>`, `</tr>`), which HTML makes
    /// optional before the next cell or row: the browser builds the same table, and the
    /// memory lab's 2,400 rows are 120 KB lighter.
    pub fn to_html(&self, caption: &str, extra: Option<(&str, &[String], usize)>) -> String {
        use crate::svg::escape;
        let at = extra.map_or(usize::MAX, |e| e.2);
        // Number columns are named once, on the table (`nK`: the K-th column, counted from
        // 1 as CSS's `nth-child` counts, which `style.css` right-aligns up to K = 16), not on
        // each cell: the memory lab's table has 10,000 number cells.
        let mut classes = String::from("results sortable");
        let mut column = 0;
        for (i, a) in self.aligns.iter().enumerate() {
            if i == at {
                classes.push_str(&format!(" p{}", column + 1));
            }
            column += 1 + usize::from(i == at);
            if *a == Align::Right {
                classes.push_str(&format!(" n{column}"));
            }
        }
        if at >= self.headers.len() && extra.is_some() {
            classes.push_str(&format!(" p{}", column + 1));
        }
        let mut out = format!("<table class=\"{classes}\">\n");
        if !caption.is_empty() {
            out.push_str(&format!("<caption>{}</caption>\n", escape(caption)));
        }
        out.push_str("<thead><tr>");
        for (i, (h, a)) in self.headers.iter().zip(&self.aligns).enumerate() {
            if i == at {
                out.push_str(&format!(
                    "<th scope=\"col\">{}</th>",
                    escape(extra.map_or("", |e| e.0))
                ));
            }
            let class = if *a == Align::Right { " class=\"num\"" } else { "" };
            out.push_str(&format!("<th scope=\"col\"{class}>{}</th>", escape(h)));
        }
        if at >= self.headers.len() && extra.is_some() {
            out.push_str(&format!("<th scope=\"col\">{}</th>", escape(extra.map_or("", |e| e.0))));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (row, r) in self.rows.iter().enumerate() {
            let plot = || {
                let cell = extra.and_then(|e| e.1.get(row)).map_or("", |c| c.as_str());
                format!("<td>{cell}")
            };
            out.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                if i == at {
                    out.push_str(&plot());
                }
                out.push_str(&format!("<td>{}", escape(c)));
            }
            if at >= self.headers.len() && extra.is_some() {
                out.push_str(&plot());
            }
            out.push('\n');
        }
        out.push_str("</tbody></table>\n");
        out
    }

    /// Column widths for [`Table::terminal_line`], given fixed minimums per column.
    pub fn fixed_widths(&self, min: &[usize]) -> Vec<usize> {
        self.widths()
            .iter()
            .zip(min.iter().chain(std::iter::repeat(&0)))
            .map(|(a, b)| *a.max(b))
            .collect()
    }
}

/// `s` escaped, reusing its allocation when nothing needed escaping.
fn escape_owned(s: String) -> String {
    match escape(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(e) => e,
    }
}

/// Wraps `text` at `width` terminal columns; words are never split, so a word longer than
/// the width gets a line of its own.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut col = 0;
    for word in text.split_whitespace() {
        let n = word.width();
        if col > 0 && col + 1 + n > width {
            out.push('\n');
            col = 0;
        } else if col > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_columns_align_with_multibyte_units() {
        let mut t = Table::new(&[("probe", Align::Left), ("median", Align::Right)]);
        t.row(vec!["a".into(), "1.000 µs".into()]);
        t.row(vec!["longer".into(), "2 ns".into()]);
        let text = t.to_terminal();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], "a       1.000 µs");
        assert_eq!(lines[3], "longer      2 ns");
    }

    #[test]
    fn wide_characters_take_two_columns() {
        let mut t = Table::new(&[("host", Align::Left), ("n", Align::Right)]);
        t.row(vec!["東京".into(), "1".into()]);
        t.row(vec!["berlin".into(), "2".into()]);
        let text = t.to_terminal();
        let lines: Vec<&str> = text.lines().collect();
        // "東京" is four columns wide, so it is padded with two spaces to "berlin"'s six.
        assert_eq!(lines[2], "東京    1");
        assert_eq!(lines[3], "berlin  2");
    }

    #[test]
    fn wrapping_keeps_lines_within_the_width() {
        let w = wrap(&"word ".repeat(100), 20);
        assert!(w.lines().all(|l| l.len() <= 20));
        assert_eq!(w.split_whitespace().count(), 100);
        assert_eq!(wrap("a verylongword b", 4), "a\nverylongword\nb");
    }

    #[test]
    fn cells_from_elsewhere_cannot_drive_the_terminal_nor_forge_rows() {
        let mut t = Table::new(&[("label", Align::Left), ("n", Align::Right)]);
        t.row(vec!["x\x1b[31m\x1b]8;;http://evil\x07y\r\n1  forged".into(), "1".into()]);
        for text in [t.to_terminal(), t.to_markdown(), t.terminal_line(t.cells(0), &[10, 1])] {
            assert!(!text.contains(['\x1b', '\x07', '\r']), "{text:?}");
        }
        assert_eq!(t.to_terminal().lines().count(), 3, "header, rule, one row");
        assert_eq!(t.to_markdown().lines().count(), 3);
        let raw = vec!["a\x1bb".to_string()];
        assert_eq!(t.terminal_line(&raw, &[1]), "a\\u{1b}b");
    }

    #[test]
    fn markdown_escapes_pipes() {
        let mut t = Table::new(&[("x", Align::Left)]);
        t.row(vec!["a|b".into()]);
        assert!(t.to_markdown().contains("| a\\|b |"));
    }
}

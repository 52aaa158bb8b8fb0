//! Reading the README and the guide (`docs/src/`) as the tests that keep
//! them true need: fenced code blocks, the quick start's region, links and
//! the anchors headings get.

/// A fenced code block: its info string (`rust`, `toml`, `rust,ignore`,
/// ...) and its lines as written, without the fences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// What follows the opening fence, trimmed.
    pub info: String,
    /// The block's lines, untouched.
    pub lines: Vec<String>,
    /// The opening fence's line number, from 1.
    pub line: usize,
}

impl Block {
    /// Whether the block is Rust: its info string's first word is `rust`
    /// (`rust`, `rust,ignore`, `rust no_run`, ...).
    pub fn is_rust(&self) -> bool {
        self.language() == "rust"
    }

    /// The info string's first word.
    pub fn language(&self) -> &str {
        self.info
            .split([',', ' ', '\t'])
            .next()
            .unwrap_or("")
            .trim()
    }

    /// The block's text, its lines joined with newlines.
    pub fn text(&self) -> String {
        let mut text = self.lines.join("\n");
        text.push('\n');
        text
    }
}

/// Every fenced (```) code block of a Markdown text, in order.
pub fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (number, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut current, fence) {
            (None, true) => {
                current = Some(Block {
                    info: line.trim().trim_start_matches('`').trim().to_owned(),
                    lines: Vec::new(),
                    line: number + 1,
                });
            }
            (Some(block), false) => block.lines.push(line.to_owned()),
            (Some(_), true) => blocks.extend(current.take()),
            (None, false) => {}
        }
    }
    assert!(
        current.is_none(),
        "a code block opened at line {} is never closed",
        current.map_or(0, |block| block.line)
    );
    blocks
}

/// The README's quick start: the text between `<!-- quickstart` and
/// `<!-- /quickstart -->`, which `tests/it/quickstart.rs` builds as an
/// application crate of its own.
pub fn quickstart(readme: &str) -> Option<&str> {
    let start = readme.find("<!-- quickstart")?;
    let end = start + readme[start..].find("<!-- /quickstart -->")?;
    Some(&readme[start..end])
}

/// The Markdown text with the quick start's region left out.
pub fn without_quickstart(readme: &str) -> String {
    match quickstart(readme) {
        Some(region) => readme.replacen(region, "", 1),
        None => readme.to_owned(),
    }
}

/// The file a quick-start block goes to, from its first line
/// (`// src/lib.rs`).
pub fn file_of(block: &Block) -> Option<&str> {
    let first = block.lines.first()?.trim();
    let path = first.strip_prefix("// ")?;
    (path.starts_with("src/") && path.ends_with(".rs") && !path.contains(' ')).then_some(path)
}

/// The targets of the inline links (`[text](target)`) of a Markdown text,
/// outside code blocks and code spans, with their line numbers.
pub fn links(markdown: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    let mut in_block = false;
    // A link's text may wrap onto the next line: join each paragraph.
    let mut paragraph: Vec<(usize, String)> = Vec::new();
    let mut flush = |paragraph: &mut Vec<(usize, String)>| {
        if paragraph.is_empty() {
            return;
        }
        let first = paragraph[0].0;
        let text = paragraph
            .iter()
            .map(|(_, line)| without_code_spans(line))
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            let target = target.split_whitespace().next().unwrap_or("");
            links.push((first, target.to_owned()));
            rest = &after[end..];
        }
        paragraph.clear();
    };
    for (number, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            flush(&mut paragraph);
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut paragraph);
        } else {
            paragraph.push((number + 1, line.to_owned()));
        }
    }
    flush(&mut paragraph);
    links
}

/// A line with its code spans (`...`) blanked out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_span = false;
    for c in line.chars() {
        if c == '`' {
            in_span = !in_span;
            out.push(' ');
        } else if in_span {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The anchors of a Markdown text's headings, as GitHub and mdBook make
/// them (lower case; letters, digits, `-` and `_` kept; spaces to `-`;
/// the rest dropped).
pub fn anchors(markdown: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut in_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        anchors.push(slug(title.trim()));
    }
    anchors
}

/// A heading's anchor.
pub fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() => Some(c.to_lowercase().collect::<String>()),
            '-' | '_' => Some(c.to_string()),
            c if c.is_whitespace() => Some("-".to_owned()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_links_and_anchors() {
        let text = "# The `jobqueue` command\n\nSee [a](b.md#c-d) and `[x](y)`,\n[wrapped\ntext](e.md).\n\n```rust,ignore\nlet a = 1;\n```\n\n## `#[derive(Job)]`\n";
        let blocks = fenced_blocks(text);
        assert_eq!(blocks.len(), 1);
        assert!(blocks[0].is_rust());
        assert_eq!(blocks[0].lines, ["let a = 1;"]);
        assert_eq!(
            links(text),
            [(3, "b.md#c-d".to_owned()), (3, "e.md".to_owned())]
        );
        assert_eq!(anchors(text), ["the-jobqueue-command", "derivejob"]);
    }
}

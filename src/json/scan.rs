//! A strict scanner for the JSON the hot paths read on every request: the MCP request envelope
//! (src/mcp/envelope/) and the host's run document (src/host/snapshot.rs).
//!
//! It reads a subset of JSON (RFC 8259) and gives up (`None`) on anything outside it: a member
//! name or a borrowed string ([`Scan::str`]) with an escape, a control character in a string,
//! a number with an exponent or more than 18 integer digits, nesting deeper than
//! [`MAX_DEPTH`], anything that is not JSON. A string value with escapes is found by its
//! closing quote and handed to serde_json, which checks (a lone surrogate escape is refused
//! as a `Value` read refuses it) and decodes it. On what it accepts it reads exactly what
//! serde_json reads (numbers too are handed to serde_json); a caller whose scan gives up reads
//! the same bytes with serde_json, so every refusal and every odd number keeps serde_json's
//! answer. The common document
//! (plain ids, times and status names) is read without serde's visitor layers, which cost
//! about as much as the rest of a `tasks/get` translation.

use serde_json::Value;

/// Nesting the scanner follows before it gives up (counted from the document's top); serde_json's
/// own limit is 128.
const MAX_DEPTH: u32 = 64;

/// The widest integer part read here: 18 digits always fit an `i64`/`u64`, so a longer one
/// (which serde_json reads as a float, or refuses) is left to serde_json.
const MAX_INT_DIGITS: usize = 18;

pub(crate) struct Scan<'a> {
    text: &'a str,
    i: usize,
    /// The objects and arrays open where the scanner is, and the most that were open at once.
    depth: u32,
    deepest: u32,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scan {
            text,
            i: 0,
            depth: 0,
            deepest: 0,
        }
    }

    /// The deepest nesting read so far: for a whole document read, the depth a byte-wise count
    /// of its brackets outside strings finds (every string was read to its closing quote).
    pub(crate) fn deepest(&self) -> u32 {
        self.deepest
    }

    /// Enters an object or an array; `None` (give up) beyond [`MAX_DEPTH`].
    fn open(&mut self) -> Option<()> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        Some(())
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.i += 1;
        }
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Only whitespace is left (what serde_json's `end` checks after the value).
    pub(crate) fn at_end(&mut self) -> bool {
        self.ws();
        self.i == self.text.len()
    }

    /// A string without escapes: its content, borrowed from the text.
    pub(crate) fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = start + plain_len(&self.bytes()[start..])?;
        self.i = end + 1;
        // Both ends sit at ASCII quotes, so they are char boundaries.
        self.text.get(start..end)
    }

    /// A string's content, or `None` (inside `Some`) for any other value, which is skipped.
    pub(crate) fn str_or_not(&mut self) -> Option<Option<&'a str>> {
        if self.peek()? == b'"' {
            self.str().map(Some)
        } else {
            self.skip().map(|_| None)
        }
    }

    /// Any value's text, checked.
    pub(crate) fn raw(&mut self) -> Option<&'a str> {
        let start = self.i;
        self.skip()?;
        self.text.get(start..self.i)
    }

    /// Any value as the `Value` serde_json reads from it.
    pub(crate) fn value(&mut self) -> Option<Value> {
        if self.peek()? == b'"' {
            let (raw, escaped) = self.string()?;
            return Some(Value::String(if escaped {
                serde_json::from_str(raw).ok()?
            } else {
                raw[1..raw.len() - 1].to_owned()
            }));
        }
        let raw = self.raw()?;
        // A JSON-RPC id is most often a small integer: read as serde_json reads it (a `u64`
        // when it fits, and any 19 digits do), without its deserializer.
        let b = raw.as_bytes();
        if (1..=19).contains(&b.len())
            && b.iter().all(u8::is_ascii_digit)
            && (b[0] != b'0' || b.len() == 1)
        {
            return raw.parse::<u64>().ok().map(Value::from);
        }
        serde_json::from_str(raw).ok()
    }

    /// A string's text, quotes included, and whether it holds an escape; one with escapes is
    /// checked by serde_json (the decoded text is then dropped: only [`Scan::value`] keeps
    /// it). `None` at a control character, an escape serde_json refuses, or the text's end.
    fn string(&mut self) -> Option<(&'a str, bool)> {
        let start = self.i;
        self.eat(b'"')?;
        let b = self.bytes();
        let mut i = self.i;
        let mut escaped = false;
        let end = loop {
            let at = i + special_at(b.get(i..)?)?;
            match b[at] {
                b'"' => break at,
                // The escaped byte is passed over with its backslash (a `\"` does not end the
                // string); what the escape says is serde_json's to check below.
                b'\\' => {
                    escaped = true;
                    i = at + 2;
                }
                _ => return None,
            }
        };
        self.i = end + 1;
        // Both ends sit at ASCII quotes, so they are char boundaries.
        let raw = self.text.get(start..=end)?;
        if escaped && serde_json::from_str::<String>(raw).is_err() {
            return None;
        }
        Some((raw, escaped))
    }

    /// An object's members: `member` is called with each name and the scanner at its value,
    /// which it must read. `None` when the value is not an object, or on any give-up.
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&'a str, &mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.open()?;
        self.ws();
        if self.eat(b'}').is_none() {
            loop {
                let name = self.str()?;
                self.ws();
                self.eat(b':')?;
                self.ws();
                member(name, self)?;
                if self.closes(b'}')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// After a member or an element: `Some(true)` at the closing `close`, `Some(false)` after
    /// a comma (and the whitespace after it), `None` at anything else.
    fn closes(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let c = self.peek()?;
        self.i += 1;
        if c == close {
            return Some(true);
        }
        (c == b',').then(|| self.ws()).map(|_| false)
    }

    /// Any value, checked and passed over.
    pub(crate) fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|_, s| s.skip()),
            b'[' => {
                self.i += 1;
                self.open()?;
                self.ws();
                if self.eat(b']').is_none() {
                    loop {
                        self.skip()?;
                        if self.closes(b']')? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        self.text[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` with at most [`MAX_INT_DIGITS`] integer digits; an
    /// exponent gives up (serde_json refuses one out of range).
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        let start = self.i;
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.i - start > MAX_INT_DIGITS {
            return None;
        }
        if self.eat(b'.').is_some() {
            let first = self.i;
            self.digits();
            if self.i == first {
                return None;
            }
        }
        match self.peek() {
            Some(b'e' | b'E') => None,
            _ => Some(()),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

/// Where the string that starts at `b` (after its opening quote) ends: the index of its
/// closing quote, or `None` when an escape or a control character comes first (RFC 8259 §7:
/// those must be escaped; serde_json refuses them) or the text ends.
fn plain_len(b: &[u8]) -> Option<usize> {
    let at = special_at(b)?;
    (b[at] == b'"').then_some(at)
}

/// The index of the first quote, backslash or control character in `b`, `None` when there is
/// none. Read eight bytes at a time: the lowest byte flagged is the first such byte (a flag can
/// only be wrong above a true one).
fn special_at(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let (w, len) = match b.get(i..i + 8) {
            Some(chunk) => (u64::from_le_bytes(chunk.try_into().ok()?), 8),
            None => {
                // The tail, padded with bytes that flag nothing.
                let rest = b.get(i..)?;
                let mut pad = [b'a'; 8];
                pad[..rest.len()].copy_from_slice(rest);
                (u64::from_le_bytes(pad), rest.len())
            }
        };
        let flags = special(w);
        if flags != 0 {
            let at = (flags.trailing_zeros() / 8) as usize;
            return (at < len).then_some(i + at);
        }
        if len < 8 {
            return None;
        }
        i += 8;
    }
}

/// `s` written as a JSON string needs no escape (no quote, backslash or control character):
/// serde_json would write it as it is, between quotes.
pub(crate) fn is_plain(s: &str) -> bool {
    let b = s.as_bytes();
    let word = |c: &[u8]| <[u8; 8]>::try_from(c).map(u64::from_le_bytes);
    if b.len() < 8 {
        // Padded with bytes that flag nothing.
        let mut pad = [b'a'; 8];
        for (p, &c) in pad.iter_mut().zip(b) {
            *p = c;
        }
        return special(u64::from_le_bytes(pad)) == 0;
    }
    let mut chunks = b.chunks_exact(8);
    for c in chunks.by_ref() {
        if word(c).map_or(true, |w| special(w) != 0) {
            return false;
        }
    }
    // The tail as the last eight bytes, overlapping what was checked (no byte loop).
    chunks.remainder().is_empty()
        || b.get(b.len() - 8..)
            .is_some_and(|c| word(c).is_ok_and(|w| special(w) == 0))
}

/// Appends `s` as serde_json writes a string: as it is between quotes when it needs no
/// escape, else through serde_json.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    if is_plain(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a `str` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// The high bit of each byte of `w` that is a quote, a backslash or below 0x20 (exact for the
/// lowest such byte).
fn special(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    (quote | backslash | control) & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A whole document through [`Scan::value`]: what it reads is what serde_json reads.
    fn scanned(text: &str) -> Option<Value> {
        let mut s = Scan::new(text);
        s.ws();
        let v = s.value()?;
        s.at_end().then_some(v)
    }

    #[test]
    fn what_the_scanner_accepts_serde_json_reads_the_same() {
        let docs = [
            r#"{"a":"b","c":[1,-2,0.5,-0.25,true,false,null,{}],"d":{"e":[]}}"#,
            " { \"x\" :\t[ 1 , 2 ]\r\n } ",
            r#""plain é text longer than eight bytes""#,
            "123456789012345678",
            "0",
            "42",
            "-0",
            "[[[[1]]]]",
            r#"{"text":"line\nbreak \"quoted\" back\\slash \u00e9 \ud83d\ude00","n":["a\"b"]}"#,
            r#""a\"b""#,
            r#"["\\", "\\\"", "\/", "end\\"]"#,
        ];
        for d in docs {
            let want: Value = serde_json::from_str(d).unwrap();
            assert_eq!(scanned(d), Some(want), "{d}");
        }
    }

    #[test]
    fn the_scanner_gives_up_on_what_it_does_not_read_itself() {
        for d in [
            r#""tab	inside""#,
            r#""\x""#,
            r#""\ud800""#,
            r#"["\ud800 lone"]"#,
            r#"{"k":"\udc00"}"#,
            r#""\u00e""#,
            r#"{"a\"b":1}"#,
            "\"ends in a backslash\\",
            "\"unterminated",
            "1e5",
            "1234567890123456789",
            "01",
            "1.",
            "-",
            ".5",
            r#"{"a":1,}"#,
            "[1,]",
            "[1 2]",
            r#"{"a" 1}"#,
            "tru",
            "nul",
            "{} x",
            "[",
            "",
        ] {
            assert_eq!(scanned(d), None, "{d}");
        }
        let deep = format!("{}{}", "[".repeat(70), "]".repeat(70));
        assert_eq!(scanned(&deep), None);
        let fits = format!("{}{}", "[".repeat(60), "]".repeat(60));
        assert!(scanned(&fits).is_some());
    }

    /// Every cut and every one-byte change of a document either gives up or reads what
    /// serde_json reads: the scanner never accepts what serde_json refuses.
    #[test]
    fn a_damaged_document_is_never_read_differently_from_serde_json() {
        let doc = r#"{"runId":"acme/r-1","status":"running","n":[1,-0.5,true,null],"o":{"k":"v\"é\u0041"}}"#;
        let mut tried = 0;
        let mut check = |t: &str| {
            tried += 1;
            if let Some(v) = scanned(t) {
                assert_eq!(serde_json::from_str::<Value>(t).ok(), Some(v), "{t}");
            }
        };
        for cut in 0..doc.len() {
            if let Some(t) = doc.get(..cut) {
                check(t);
            }
        }
        for at in 0..doc.len() {
            for b in [
                b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'1', b'e', b' ', b'\n', 1u8, b'x',
            ] {
                let mut bytes = doc.as_bytes().to_vec();
                bytes[at] = b;
                if let Ok(t) = String::from_utf8(bytes) {
                    check(&t);
                }
            }
        }
        assert!(tried > 500);
    }

    /// A string is written exactly as serde_json writes it, escapes or not, on both sides of
    /// the eight-byte steps.
    #[test]
    fn a_string_is_written_as_serde_json_writes_it() {
        for base in [
            "",
            "plain",
            "é and 漢字",
            "a\"b",
            "back\\slash",
            "tab\there",
            "\u{1f}",
            "\u{7f}",
        ] {
            for pad in 0..10 {
                let s = format!("{}{base}{}", "x".repeat(pad), "y".repeat(pad % 3));
                let mut out = Vec::new();
                write_str(&mut out, &s);
                assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
            }
        }
    }

    #[test]
    fn a_string_ends_at_its_quote_across_the_eight_byte_steps() {
        for n in 0..20 {
            let high = format!("\"{}é\"", "a".repeat(n));
            assert_eq!(Scan::new(&high).str(), Some(&high[1..high.len() - 1]));
            let open = format!("\"{}", "a".repeat(n));
            assert_eq!(Scan::new(&open).str(), None);
            let s = format!("\"{}\"", "a".repeat(n));
            assert_eq!(Scan::new(&s).str(), Some("a".repeat(n).as_str()));
            for bad in ["\\", "\u{1}", "\u{1f}"] {
                let s = format!("\"{}{bad}\"", "a".repeat(n));
                assert_eq!(Scan::new(&s).str(), None, "{n} {bad:?}");
            }
        }
    }
}

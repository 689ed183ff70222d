//! A strict `.npy` reader that accepts what `np.load` accepts, with NumPy's meaning.
//!
//! NumPy reads the header with `ast.literal_eval` and then checks it
//! (`numpy/lib/_format_impl.py`, `_read_array_header`). This module parses the same Python
//! literal subset NumPy's own writers and any sane producer use — dicts, tuples, lists,
//! strings (`'..'`, `".."`, `u'..'`, implicit concatenation), ints (decimal, `0x`, `0o`, `0b`,
//! `_` separators, a single sign), `True`/`False`/`None`, comments, blank lines — and applies
//! NumPy's rules: exactly the keys `descr`, `fortran_order`, `shape` (a duplicated key: the
//! last wins, as in a Python dict), `fortran_order` a bool, `shape` a tuple of non-negative
//! ints whose product fits in `i64`, only format versions 1.0, 2.0 and 3.0, headers of at most
//! 10,000 characters, and nothing after the dict but whitespace and comments.
//!
//! Python syntax NumPy accepts but no producer writes (string escapes, raw or triple-quoted
//! strings, backslash line continuations) and dtypes lockstep has no tensor type for are
//! refused with an error that says "unsupported"; every other refusal is a file NumPy refuses
//! too. `tests/npy_differential.rs` checks both against a corpus judged by NumPy itself.

use lockstep_tensor::Tensor;

/// NumPy's `_MAX_HEADER_SIZE` (the `max_header_size` of `np.load` without `allow_pickle`).
pub(crate) const MAX_HEADER_CHARS: usize = 10_000;

/// One element type a `.npy` file can hold that lockstep reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    F4,
    F8,
    I1,
    I2,
    I4,
    I8,
    U1,
    U2,
    U4,
    B1,
}

impl Kind {
    fn size(self) -> usize {
        match self {
            Kind::I1 | Kind::U1 | Kind::B1 => 1,
            Kind::I2 | Kind::U2 => 2,
            Kind::F4 | Kind::I4 | Kind::U4 => 4,
            Kind::F8 | Kind::I8 => 8,
        }
    }
}

/// A parsed and checked header.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Header {
    pub kind: Kind,
    pub big_endian: bool,
    pub fortran: bool,
    pub shape: Vec<usize>,
    /// Offset of the first data byte.
    pub data_start: usize,
}

/// Why a file was refused: `Unsupported` where NumPy would read it.
#[derive(Debug)]
pub(crate) enum Refusal {
    Invalid(String),
    Unsupported(String),
}

type R<T> = Result<T, Refusal>;

fn inv<T>(s: impl Into<String>) -> R<T> {
    Err(Refusal::Invalid(s.into()))
}

fn unsup<T>(s: impl Into<String>) -> R<T> {
    Err(Refusal::Unsupported(s.into()))
}

/// A Python literal value (only what can matter to the header checks).
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Str(String),
    /// An int; `None` if it does not fit in `i128` (a Python int may be any size).
    Int(Option<i128>),
    Bool(bool),
    NoneV,
    Tuple(Vec<Val>),
    List(Vec<Val>),
    Dict(Vec<(Val, Val)>),
    /// A float, complex, set or bytes value: never valid where the header checks look.
    Other,
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
    /// Format version ≤ 2.0: NumPy retries with Python 2 `L` suffixes removed.
    py2_longs: bool,
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    /// Skips whitespace, newlines and comments (inside brackets, where lines may break).
    fn skip_ws(&mut self) -> R<()> {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\x0c' | '\n' | '\r' => self.i += 1,
                '#' => {
                    while !matches!(self.peek(), None | Some('\n' | '\r')) {
                        self.i += 1;
                    }
                }
                '\\' => return unsup("unsupported header syntax: backslash line continuation"),
                _ => break,
            }
        }
        Ok(())
    }

    fn expect(&mut self, c: char) -> R<()> {
        self.skip_ws()?;
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            inv(format!(
                "cannot parse header: expected `{c}` at character {}",
                self.i
            ))
        }
    }

    /// A comma-separated sequence up to `close`; returns the items and whether a comma was seen.
    fn seq(&mut self, close: char) -> R<(Vec<Val>, bool)> {
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            self.skip_ws()?;
            if self.peek() == Some(close) {
                self.i += 1;
                return Ok((items, comma));
            }
            items.push(self.value()?);
            self.skip_ws()?;
            match self.peek() {
                Some(',') => {
                    self.i += 1;
                    comma = true;
                }
                Some(c) if c == close => {}
                _ => {
                    return inv(format!(
                        "cannot parse header: expected `,` or `{close}` at character {}",
                        self.i
                    ));
                }
            }
        }
    }

    fn value(&mut self) -> R<Val> {
        self.skip_ws()?;
        let Some(c) = self.peek() else {
            return inv("cannot parse header: unexpected end");
        };
        match c {
            '{' => {
                self.i += 1;
                self.skip_ws()?;
                if self.peek() == Some('}') {
                    self.i += 1;
                    return Ok(Val::Dict(Vec::new()));
                }
                let first = self.value()?;
                self.skip_ws()?;
                if self.peek() != Some(':') {
                    // A set: never a valid header, but parse it to tell "not a dict".
                    if self.peek() == Some(',') {
                        self.i += 1;
                    }
                    let _ = first;
                    self.seq('}')?;
                    return Ok(Val::Other);
                }
                self.i += 1;
                let mut items = vec![(first, self.value()?)];
                loop {
                    self.skip_ws()?;
                    match self.peek() {
                        Some('}') => {
                            self.i += 1;
                            return Ok(Val::Dict(items));
                        }
                        Some(',') => {
                            self.i += 1;
                            self.skip_ws()?;
                            if self.peek() == Some('}') {
                                self.i += 1;
                                return Ok(Val::Dict(items));
                            }
                            let k = self.value()?;
                            self.expect(':')?;
                            let v = self.value()?;
                            items.push((k, v));
                        }
                        _ => {
                            return inv(format!(
                                "cannot parse header: expected `,` or `}}` at character {}",
                                self.i
                            ));
                        }
                    }
                }
            }
            '(' => {
                self.i += 1;
                let (items, comma) = self.seq(')')?;
                if items.len() == 1 && !comma {
                    Ok(items.into_iter().next().expect("one item"))
                } else {
                    Ok(Val::Tuple(items))
                }
            }
            '[' => {
                self.i += 1;
                Ok(Val::List(self.seq(']')?.0))
            }
            '\'' | '"' => self.strings(false),
            '-' | '+' => {
                self.i += 1;
                self.skip_ws()?;
                // literal_eval allows one sign directly on a number (parentheses are no nodes).
                let mut depth = 0;
                while self.peek() == Some('(') {
                    self.i += 1;
                    depth += 1;
                    self.skip_ws()?;
                }
                let v = match self.peek() {
                    Some(d) if d.is_ascii_digit() || d == '.' => self.number()?,
                    _ => return inv("cannot parse header: a sign on a non-number"),
                };
                for _ in 0..depth {
                    self.expect(')')?;
                }
                Ok(match v {
                    Val::Int(Some(x)) if c == '-' => Val::Int(x.checked_neg()),
                    v => v,
                })
            }
            d if d.is_ascii_digit() || d == '.' => self.number(),
            d if is_ident_char(d) => {
                let s = self.i;
                while self.peek().is_some_and(is_ident_char) {
                    self.i += 1;
                }
                let name: String = self.s[s..self.i].iter().collect();
                if matches!(self.peek(), Some('\'' | '"')) {
                    return match name.as_str() {
                        "u" | "U" => self.strings(false),
                        "b" | "B" => self.strings(true),
                        _ => unsup(format!("unsupported header syntax: string prefix `{name}`")),
                    };
                }
                match name.as_str() {
                    "True" => Ok(Val::Bool(true)),
                    "False" => Ok(Val::Bool(false)),
                    "None" => Ok(Val::NoneV),
                    _ => inv(format!("cannot parse header: name `{name}`")),
                }
            }
            _ => inv(format!(
                "cannot parse header: unexpected {c:?} at character {}",
                self.i
            )),
        }
    }

    /// One or more adjacent string literals (Python concatenates them).
    fn strings(&mut self, bytes: bool) -> R<Val> {
        let mut out = String::new();
        let mut any_bytes = bytes;
        let mut any_str = !bytes;
        loop {
            let q = self.peek().expect("a quote");
            self.i += 1;
            if self.s.get(self.i..self.i + 2) == Some(&[q, q][..]) {
                return unsup("unsupported header syntax: triple-quoted string");
            }
            loop {
                match self.peek() {
                    None | Some('\n' | '\r') => {
                        return inv("cannot parse header: unterminated string");
                    }
                    Some('\\') => {
                        return unsup("unsupported header syntax: escape in a string");
                    }
                    Some(c) if c == q => {
                        self.i += 1;
                        break;
                    }
                    Some(c) => {
                        if bytes && !c.is_ascii() {
                            return inv("cannot parse header: non-ASCII bytes literal");
                        }
                        out.push(c);
                        self.i += 1;
                    }
                }
            }
            // Another literal follows (possibly after whitespace or, in brackets, newlines)?
            let save = self.i;
            self.skip_ws()?;
            let pfx_start = self.i;
            while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                self.i += 1;
            }
            let pfx: String = self.s[pfx_start..self.i].iter().collect();
            if matches!(self.peek(), Some('\'' | '"')) {
                match pfx.as_str() {
                    "" | "u" | "U" => any_str = true,
                    "b" | "B" => any_bytes = true,
                    _ => {
                        return unsup(format!("unsupported header syntax: string prefix `{pfx}`"));
                    }
                }
                if any_bytes && any_str {
                    return inv("cannot parse header: cannot mix bytes and str literals");
                }
                continue;
            }
            self.i = save;
            return Ok(if any_bytes { Val::Other } else { Val::Str(out) });
        }
    }

    fn number(&mut self) -> R<Val> {
        let s = self.i;
        while let Some(c) = self.peek() {
            let prev = if self.i > s {
                Some(self.s[self.i - 1])
            } else {
                None
            };
            let exp_sign = matches!(c, '+' | '-')
                && matches!(prev, Some('e' | 'E'))
                && !self.s[s..].starts_with(&['0', 'x'])
                && !self.s[s..].starts_with(&['0', 'X']);
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || exp_sign {
                self.i += 1;
            } else {
                break;
            }
        }
        let tok: String = self.s[s..self.i].iter().collect();
        // `3L` is a NUMBER and a NAME `L` to Python's tokenizer, which the retry drops.
        let v = match tok.strip_suffix('L') {
            Some(t) if self.py2_longs && !t.is_empty() => parse_number(t)?,
            _ => parse_number(&tok)?,
        };
        if self.py2_longs {
            // `_filter_header` drops a NAME token `L` right after a NUMBER token.
            let save = self.i;
            while matches!(self.peek(), Some(' ' | '\t' | '\x0c')) {
                self.i += 1;
            }
            if self.peek() == Some('L')
                && !self.s.get(self.i + 1).is_some_and(|&c| is_ident_char(c))
            {
                self.i += 1;
            } else {
                self.i = save;
            }
        }
        Ok(v)
    }
}

/// A Python number token: an int's value, `Other` for a float or complex, or a syntax error.
fn parse_number(tok: &str) -> R<Val> {
    let bad = || inv(format!("cannot parse header: invalid number `{tok}`"));
    let digits = |body: &str, radix: u32| -> R<Val> {
        // Python: digits with single `_` between them (a `_` may follow the prefix).
        if body.is_empty() || body.ends_with('_') || body.contains("__") {
            return bad();
        }
        let mut v: Option<i128> = Some(0);
        for c in body.chars().filter(|&c| c != '_') {
            let d = c.to_digit(radix).ok_or_else(|| {
                Refusal::Invalid(format!("cannot parse header: invalid number `{tok}`"))
            })?;
            v = v
                .and_then(|v| v.checked_mul(radix as i128))
                .and_then(|v| v.checked_add(d as i128));
        }
        Ok(Val::Int(v))
    };
    let lower = tok.to_ascii_lowercase();
    if let Some(b) = lower.strip_prefix("0x") {
        return digits(b, 16);
    }
    if let Some(b) = lower.strip_prefix("0o") {
        return digits(b, 8);
    }
    if let Some(b) = lower.strip_prefix("0b") {
        return digits(b, 2);
    }
    if tok.chars().all(|c| c.is_ascii_digit() || c == '_') {
        if tok.starts_with('_') {
            return bad();
        }
        // A leading zero is only allowed for zero itself (`00`, `0_0`).
        if tok.starts_with('0') && tok.chars().any(|c| c.is_ascii_digit() && c != '0') {
            return bad();
        }
        return digits(tok, 10);
    }
    // Float or imaginary: digits, one `.`, an exponent, an optional `j`.
    let body = lower.strip_suffix('j').unwrap_or(&lower);
    let (mant, exp) = match body.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (body, None),
    };
    let ok_digits = |s: &str| {
        !s.is_empty()
            && !s.starts_with('_')
            && !s.ends_with('_')
            && !s.contains("__")
            && s.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    let mant_ok = match mant.split_once('.') {
        Some((a, b)) => {
            (a.is_empty() || ok_digits(a))
                && (b.is_empty() || ok_digits(b))
                && !(a.is_empty() && b.is_empty())
        }
        None => ok_digits(mant) && (exp.is_some() || body.len() < lower.len()),
    };
    let exp_ok = exp.is_none_or(|e| ok_digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    if mant_ok && exp_ok {
        Ok(Val::Other)
    } else {
        bad()
    }
}

/// The column of the first significant character of a line (Python's indentation: a form feed
/// resets it).
fn indentation(line: &[char]) -> (usize, usize) {
    let mut col = 0;
    let mut k = 0;
    while let Some(&c) = line.get(k) {
        match c {
            ' ' | '\t' => col += 1,
            '\x0c' => col = 0,
            _ => break,
        }
        k += 1;
    }
    (col, k)
}

/// Parses the header text as `ast.literal_eval` would (within the supported subset).
fn literal_eval(text: &[char], py2_longs: bool) -> R<Val> {
    if text.contains(&'\0') {
        return inv("cannot parse header: NUL character");
    }
    // literal_eval strips leading spaces and tabs; then blank and comment lines may precede
    // the expression, which must not be indented.
    let mut i = text
        .iter()
        .position(|&c| c != ' ' && c != '\t')
        .unwrap_or(text.len());
    loop {
        let line_end = text[i..]
            .iter()
            .position(|&c| c == '\n' || c == '\r')
            .map_or(text.len(), |p| i + p);
        let (col, k) = indentation(&text[i..line_end]);
        let first = text.get(i + k).copied();
        match first {
            None => return inv("cannot parse header: empty"),
            Some('\n' | '\r' | '#') => {
                // Blank or comment-only line.
                i = line_end;
                if text[i..].starts_with(&['\r', '\n']) {
                    i += 2;
                } else if i < text.len() {
                    i += 1;
                }
                if i >= text.len() {
                    return inv("cannot parse header: empty");
                }
            }
            Some('\\') => return unsup("unsupported header syntax: backslash line continuation"),
            Some(_) if col > 0 => return inv("cannot parse header: unexpected indent"),
            Some(_) => {
                i += k;
                break;
            }
        }
    }
    let mut p = Parser {
        s: text,
        i,
        py2_longs,
    };
    let v = p.value()?;
    // The rest of the logical line: spaces and a comment, then the end of the line.
    let mut i = p.i;
    while matches!(text.get(i), Some(' ' | '\t' | '\x0c')) {
        i += 1;
    }
    if text.get(i) == Some(&'#') {
        while !matches!(text.get(i), None | Some('\n' | '\r')) {
            i += 1;
        }
    }
    match text.get(i) {
        None => return Ok(v),
        Some('\n' | '\r') => {}
        Some('\\') => return unsup("unsupported header syntax: backslash line continuation"),
        Some(c) => {
            return inv(format!(
                "cannot parse header: {c:?} after the dict at character {i}"
            ));
        }
    }
    // Further lines must be blank or comments. A last line of only spaces without a newline is
    // an indentation error to Python 3; NumPy's Python 2 retry (format ≤ 2.0) accepts it after
    // a `\n`.
    loop {
        let nl = text[i];
        i += 1;
        if nl == '\r' && text.get(i) == Some(&'\n') {
            i += 1;
        }
        let line_end = text[i..]
            .iter()
            .position(|&c| c == '\n' || c == '\r')
            .map_or(text.len(), |p| i + p);
        let line = &text[i..line_end];
        let (_, k) = indentation(line);
        match line.get(k) {
            None if line_end == text.len() => {
                if line.iter().any(|&c| c == ' ' || c == '\t') && !(py2_longs && nl == '\n') {
                    return inv("cannot parse header: unexpected indent at the end");
                }
                return Ok(v);
            }
            None | Some('#') => {}
            Some(c) => {
                return inv(format!(
                    "cannot parse header: {c:?} after the dict at character {}",
                    i + k
                ));
            }
        }
        i = line_end;
        if i >= text.len() {
            return Ok(v);
        }
    }
}

fn parse_descr(d: &Val) -> R<(Kind, bool)> {
    let Val::Str(s) = d else {
        return match d {
            Val::List(_) | Val::Tuple(_) => unsup(format!(
                "unsupported dtype descr {d:?} (structured or subarray)"
            )),
            _ => inv(format!("descr is not a valid dtype descriptor: {d:?}")),
        };
    };
    let named = match s.as_str() {
        "float32" => Some(Kind::F4),
        "float64" | "double" => Some(Kind::F8),
        "int8" => Some(Kind::I1),
        "int16" => Some(Kind::I2),
        "int32" => Some(Kind::I4),
        "int64" => Some(Kind::I8),
        "uint8" => Some(Kind::U1),
        "uint16" => Some(Kind::U2),
        "uint32" => Some(Kind::U4),
        "bool" => Some(Kind::B1),
        _ => None,
    };
    if let Some(k) = named {
        return Ok((k, false));
    }
    let (order, code) = match s.chars().next() {
        Some(c @ ('<' | '>' | '=' | '|')) => (c, &s[1..]),
        _ => ('=', s.as_str()),
    };
    let kind = match code {
        "f4" | "f" => Kind::F4,
        "f8" | "d" => Kind::F8,
        "i1" | "b" => Kind::I1,
        "i2" | "h" => Kind::I2,
        "i4" | "i" => Kind::I4,
        "i8" | "q" => Kind::I8,
        "u1" | "B" => Kind::U1,
        "u2" | "H" => Kind::U2,
        "u4" | "I" => Kind::U4,
        "b1" | "?" => Kind::B1,
        _ => {
            return unsup(format!(
                "unsupported dtype `{s}` (lockstep reads f4, f8, i1-i8, u1-u4 and b1)"
            ));
        }
    };
    // `=` and `|` are the native order; lockstep's machines are little-endian.
    Ok((kind, order == '>' && kind.size() > 1))
}

/// Parses the magic, version and header of `.npy` bytes.
pub(crate) fn parse_header(bytes: &[u8]) -> R<Header> {
    if bytes.len() < 6 || &bytes[..6] != b"\x93NUMPY" {
        return inv("missing the \\x93NUMPY magic");
    }
    if bytes.len() < 8 {
        return inv("truncated: no format version");
    }
    let (major, minor) = (bytes[6], bytes[7]);
    if !matches!((major, minor), (1, 0) | (2, 0) | (3, 0)) {
        return inv(format!(
            "format version {major}.{minor} (NumPy reads only 1.0, 2.0 and 3.0)"
        ));
    }
    let (hl, start): (usize, usize) = if major == 1 {
        let Some(b) = bytes.get(8..10) else {
            return inv("truncated header length");
        };
        (u16::from_le_bytes([b[0], b[1]]) as usize, 10)
    } else {
        let Some(b) = bytes.get(8..12) else {
            return inv("truncated header length");
        };
        (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
    };
    let Some(raw) = start.checked_add(hl).and_then(|end| bytes.get(start..end)) else {
        return inv(format!(
            "truncated header: {hl} bytes declared, {} present",
            bytes.len() - start
        ));
    };
    let text: Vec<char> = if major == 3 {
        match std::str::from_utf8(raw) {
            Ok(s) => s.chars().collect(),
            Err(e) => return inv(format!("format 3.0 header is not UTF-8: {e}")),
        }
    } else {
        raw.iter().map(|&b| b as char).collect() // latin-1
    };
    if text.len() > MAX_HEADER_CHARS {
        return inv(format!(
            "header of {} characters (NumPy refuses more than {MAX_HEADER_CHARS})",
            text.len()
        ));
    }
    let v = literal_eval(&text, major <= 2)?;
    let Val::Dict(items) = v else {
        return inv("header is not a dictionary");
    };
    // A Python dict: a repeated key keeps the last value.
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in items {
        match k {
            Val::Str(k) if k == "descr" => descr = Some(v),
            Val::Str(k) if k == "fortran_order" => fortran = Some(v),
            Val::Str(k) if k == "shape" => shape = Some(v),
            k => {
                return inv(format!(
                    "header has key {k:?} (only 'descr', 'fortran_order', 'shape')"
                ));
            }
        }
    }
    let (Some(descr), Some(fortran), Some(shape)) = (descr, fortran, shape) else {
        return inv("header lacks one of 'descr', 'fortran_order', 'shape'");
    };
    let Val::Tuple(dims) = shape else {
        return inv(format!("shape is not a tuple: {shape:?}"));
    };
    let mut out_shape = Vec::with_capacity(dims.len().min(64));
    for d in &dims {
        match d {
            Val::Int(Some(x)) if *x >= 0 => {
                let Ok(x) = i64::try_from(*x) else {
                    return inv(format!("shape entry {x} does not fit in int64"));
                };
                out_shape.push(x as usize);
            }
            Val::Int(Some(x)) => return inv(format!("negative shape entry {x}")),
            _ => return inv(format!("shape entry {d:?} is not an int")),
        }
    }
    // NumPy checks the product of the non-zero dimensions against int64.
    let mut prod: i64 = 1;
    for &d in out_shape.iter().filter(|&&d| d != 0) {
        prod = prod
            .checked_mul(d as i64)
            .ok_or_else(|| Refusal::Invalid(format!("shape {out_shape:?} overflows int64")))?;
    }
    let Val::Bool(fortran) = fortran else {
        return inv(format!("fortran_order is not a bool: {fortran:?}"));
    };
    let (kind, big_endian) = parse_descr(&descr)?;
    Ok(Header {
        kind,
        big_endian,
        fortran,
        shape: out_shape,
        data_start: start + hl,
    })
}

/// Reads the data after a parsed header into a tensor (C order, converting Fortran order).
pub(crate) fn read_data(h: &Header, bytes: &[u8]) -> R<Tensor> {
    let n = if h.shape.contains(&0) {
        0
    } else {
        h.shape.iter().product::<usize>() // checked in parse_header (fits in i64)
    };
    let need = n
        .checked_mul(h.kind.size())
        .ok_or_else(|| Refusal::Invalid("size overflows".into()))?;
    let avail = bytes.len().saturating_sub(h.data_start);
    if avail < need {
        return inv(format!(
            "truncated: {avail} data bytes, shape {:?} needs {need}",
            h.shape
        ));
    }
    let d = &bytes[h.data_start..h.data_start + need];
    // Element `k` in C order is at storage position `order[k]`.
    let perm: Option<Vec<usize>> = (h.fortran && h.shape.len() > 1).then(|| fortran_perm(&h.shape));
    let at = |k: usize| perm.as_ref().map_or(k, |p| p[k]);
    let w = h.kind.size();
    let raw = |k: usize| -> [u8; 8] {
        let p = at(k) * w;
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(&d[p..p + w]);
        if h.big_endian {
            b[..w].reverse();
        }
        b
    };
    let t = match h.kind {
        Kind::U1 => Tensor::from_vec((0..n).map(|k| raw(k)[0]).collect::<Vec<_>>(), &h.shape),
        Kind::B1 => Tensor::from_vec((0..n).map(|k| raw(k)[0] != 0).collect::<Vec<_>>(), &h.shape),
        Kind::I1 => Tensor::from_vec(
            (0..n).map(|k| raw(k)[0] as i8 as i64).collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::I2 => Tensor::from_vec(
            (0..n)
                .map(|k| {
                    let b = raw(k);
                    i16::from_le_bytes([b[0], b[1]]) as i64
                })
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::U2 => Tensor::from_vec(
            (0..n)
                .map(|k| {
                    let b = raw(k);
                    u16::from_le_bytes([b[0], b[1]]) as i64
                })
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::I4 => Tensor::from_vec(
            (0..n)
                .map(|k| {
                    let b = raw(k);
                    i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64
                })
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::U4 => Tensor::from_vec(
            (0..n)
                .map(|k| {
                    let b = raw(k);
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64
                })
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::F4 => Tensor::from_vec(
            (0..n)
                .map(|k| {
                    let b = raw(k);
                    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
                })
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::I8 => Tensor::from_vec(
            (0..n)
                .map(|k| i64::from_le_bytes(raw(k)))
                .collect::<Vec<_>>(),
            &h.shape,
        ),
        Kind::F8 => Tensor::from_vec(
            (0..n)
                .map(|k| f64::from_le_bytes(raw(k)))
                .collect::<Vec<_>>(),
            &h.shape,
        ),
    };
    t.map_err(|e| Refusal::Unsupported(format!("unsupported shape {:?}: {e}", h.shape)))
}

/// For a Fortran-ordered array of `shape`: the storage position of each element in C order.
fn fortran_perm(shape: &[usize]) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut fstride = vec![1usize; shape.len()];
    for k in 1..shape.len() {
        fstride[k] = fstride[k - 1] * shape[k - 1];
    }
    let mut idx = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(idx.iter().zip(&fstride).map(|(i, s)| i * s).sum());
        for k in (0..shape.len()).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

//! Traffic as a stream, so a recording of any size is read in flat memory: a reader thread
//! turns the bytes into exchanges, a chunk at a time, through a bounded channel (it also
//! parses while the caller audits). The input is a file or `-` (stdin), plain, gzip'd or
//! zstd'd (told by its first bytes, not its name). Its format is named by the caller or told by
//! its first line: a JSON object with `log` (a one-line HAR), a JSON object (JSON Lines), or
//! the start of a JSON document spread over lines (a HAR, whose `log.entries` are read one entry
//! at a time). A file's bytes read so far are counted, for a progress bar.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{Exchange, Item, Problem, TrafficError, har_exchange, jsonl_exchange};

/// Exchanges per chunk handed over, and chunks in flight at most: the reader runs ahead of
/// the audit by this much, no more.
const CHUNK: usize = 1024;
const CHUNKS_AHEAD: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Har,
    Jsonl,
    /// The combined (or common) log format of nginx and Apache.
    Combined,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Har => "har",
            Format::Jsonl => "jsonl",
            Format::Combined => "combined",
        }
    }
}

/// Chunks of items in recording order, read on a thread of their own.
pub struct Stream {
    pub format: Format,
    chunks: Receiver<Vec<Item>>,
    /// For a file: its size and the bytes read so far (before decompression).
    pub progress: Option<Progress>,
}

/// How far the reader is in a file.
#[derive(Clone)]
pub struct Progress {
    pub total: u64,
    read: Arc<AtomicU64>,
}

impl Progress {
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

/// A file that counts the bytes read from it.
struct Counted {
    file: File,
    read: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Iterator for Stream {
    type Item = Vec<Item>;

    fn next(&mut self) -> Option<Vec<Item>> {
        self.chunks.recv().ok()
    }
}

type Source = Box<dyn BufRead + Send>;

impl Stream {
    /// `path`, or stdin for `-`, in `format` (`None`: told by its first line).
    pub fn open(path: &Path, format: Option<Format>) -> Result<Stream, TrafficError> {
        let io = |source| TrafficError::Io {
            file: path.into(),
            source,
        };
        let (raw, progress): (Box<dyn Read + Send>, _) = if path == Path::new("-") {
            (Box::new(std::io::stdin()), None)
        } else {
            let file = File::open(path).map_err(io)?;
            let total = file.metadata().map_err(io)?.len();
            let read = Arc::new(AtomicU64::new(0));
            let progress = Progress {
                total,
                read: read.clone(),
            };
            (Box::new(Counted { file, read }), Some(progress))
        };
        let mut stream = Stream::from_reader(decompressed(raw).map_err(io)?, format).map_err(io)?;
        stream.progress = progress;
        Ok(stream)
    }

    /// Read `source` on a thread, in `format` or the one its first line tells.
    pub fn from_reader(mut source: Source, format: Option<Format>) -> std::io::Result<Stream> {
        let head = head(&mut source)?;
        let (tx, chunks) = sync_channel(CHUNKS_AHEAD);
        let format = format.unwrap_or_else(|| {
            let first = first_line(&head);
            // Cut short by the head's bound, not by its end or the end of the source.
            let cut = head.len() == HEAD && !head.ends_with(b"\n") && head.ends_with(first);
            detect(first, cut)
        });
        let rest: Source = Box::new(BufReader::new(Cursor::new(head).chain(source)));
        let spawned = std::thread::Builder::new()
            .name("driftwatch-traffic".into())
            .spawn(move || {
                let mut out = Chunker {
                    tx,
                    chunk: Vec::with_capacity(CHUNK),
                };
                match format {
                    Format::Har => har(rest, &mut out),
                    Format::Jsonl => lines(rest, &mut out, json_line),
                    Format::Combined => lines(rest, &mut out, combined_line),
                }
                out.flush();
            });
        spawned?;
        Ok(Stream {
            format,
            chunks,
            progress: None,
        })
    }
}

/// Bytes read to tell the format, at most: the start of the first line that is not blank.
/// Reading that whole line first took 1.85 GB for a 35 KB zstd file of 1 GiB of NULs.
const HEAD: usize = 64 << 10;

/// The source's first bytes, up to the end of its first line that is not blank, and never
/// more than [`HEAD`].
fn head(source: &mut Source) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let room = (HEAD - head.len()) as u64;
        let n = source.by_ref().take(room).read_until(b'\n', &mut head)?;
        if n == 0 || head.len() >= HEAD || !first_line(&head).trim_ascii().is_empty() {
            return Ok(head);
        }
    }
}

/// The first line of `head` that is not blank (or its start, when `head` ends inside it).
fn first_line(head: &[u8]) -> &[u8] {
    head.split(|&b| b == b'\n')
        .find(|line| !line.trim_ascii().is_empty())
        .unwrap_or_default()
}

/// The format a first line tells: a JSON object with `log` is a HAR, a line that is the
/// start of a JSON document (pretty-printed: `{` alone) is one too, any other JSON is a JSON
/// Lines record. A line `cut` at [`HEAD`] bytes is told by its first key.
fn detect(first: &[u8], cut: bool) -> Format {
    match serde_json::from_slice::<Value>(first) {
        Ok(Value::Object(doc)) if doc.contains_key("log") => Format::Har,
        Ok(_) => Format::Jsonl,
        Err(e) if e.is_eof() && cut => match first_key(first) {
            Some(key) if key != "log" => Format::Jsonl,
            _ => Format::Har,
        },
        Err(e) if e.is_eof() => Format::Har,
        Err(_) if super::access::is_combined(first) => Format::Combined,
        Err(_) => Format::Jsonl,
    }
}

/// The first key of the JSON object `text` starts, when the text reaches it.
fn first_key(text: &[u8]) -> Option<String> {
    /// Takes the first key, and stops there: the rest of the text may be cut short.
    struct FirstKey<'k>(&'k std::cell::Cell<Option<String>>);
    impl<'de> serde::de::Visitor<'de> for FirstKey<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            self.0.set(map.next_key::<String>()?);
            Err(serde::de::Error::custom("only the first key is read"))
        }
    }
    let key = std::cell::Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(text);
    let _ = serde::Deserializer::deserialize_map(&mut de, FirstKey(&key));
    key.take()
}

/// The bytes behind gzip's or zstd's magic number, else the bytes as they are.
fn decompressed(raw: Box<dyn Read + Send>) -> std::io::Result<Source> {
    let mut buffered = BufReader::with_capacity(1 << 16, raw);
    let magic = buffered.fill_buf()?;
    if magic.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::read::MultiGzDecoder::new(buffered);
        return Ok(Box::new(BufReader::with_capacity(1 << 16, gz)));
    }
    if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let zstd = ruzstd::decoding::StreamingDecoder::new(buffered)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        return Ok(Box::new(BufReader::with_capacity(1 << 16, zstd)));
    }
    Ok(Box::new(buffered))
}

/// Items gathered into chunks for the channel; a caller gone away stops the reading.
struct Chunker {
    tx: SyncSender<Vec<Item>>,
    chunk: Vec<Item>,
}

impl Chunker {
    /// Hand `item` on; false when no one reads any more.
    fn push(&mut self, item: Item) -> bool {
        self.chunk.push(item);
        if self.chunk.len() < CHUNK {
            return true;
        }
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK));
        self.tx.send(full).is_ok()
    }

    fn flush(&mut self) {
        if !self.chunk.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.chunk));
        }
    }
}

/// A JSON Lines line: ours (the fast path first), or an nginx or Envoy JSON log line.
fn json_line(index: usize, line: &[u8]) -> Result<Exchange, String> {
    if let Some(exchange) = super::line::exchange(index, line) {
        return Ok(exchange);
    }
    serde_json::from_slice::<Value>(line)
        .map_err(|e| e.to_string())
        .and_then(|v| jsonl_exchange(index, &v))
}

fn combined_line(index: usize, line: &[u8]) -> Result<Exchange, String> {
    let line = std::str::from_utf8(line).map_err(|e| format!("not UTF-8: {e}"))?;
    super::access::combined(index, line.trim_end())
}

/// One exchange a line; a line that is not one is a problem, and the next is read.
fn lines(
    mut source: Source,
    out: &mut Chunker,
    parse: fn(usize, &[u8]) -> Result<Exchange, String>,
) {
    let mut line = Vec::new();
    for index in 0.. {
        line.clear();
        let read = read_line(&mut source, &mut line);
        let item = match read {
            Ok(Line::End) => return,
            Ok(Line::Read) if line.trim_ascii().is_empty() => continue,
            Ok(Line::Read) => match parse(index, &line) {
                Ok(exchange) => Item::Exchange(exchange),
                Err(reason) => Item::Problem(Problem { index, reason }),
            },
            Ok(Line::TooLong) => {
                let reason = format!("a line longer than {} MiB, skipped", MAX_LINE >> 20);
                Item::Problem(Problem { index, reason })
            }
            Err(e) => {
                let reason = format!("cannot read on: {e}");
                out.push(Item::Problem(Problem { index, reason }));
                return;
            }
        };
        if !out.push(item) {
            return;
        }
    }
}

/// The longest line kept: a recording with one endless line must not fill memory.
const MAX_LINE: usize = 64 << 20;

enum Line {
    Read,
    /// Longer than [`MAX_LINE`]: read past, not kept.
    TooLong,
    End,
}

/// The next line into `line`, at most [`MAX_LINE`] bytes of it.
fn read_line(source: &mut Source, line: &mut Vec<u8>) -> std::io::Result<Line> {
    let limit = MAX_LINE as u64 + 1;
    let n = source.by_ref().take(limit).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if line.len() <= MAX_LINE || line.ends_with(b"\n") {
        return Ok(Line::Read);
    }
    // Skip to the end of the line a buffer at a time, keeping nothing.
    line.clear();
    loop {
        let buf = source.fill_buf()?;
        if buf.is_empty() {
            return Ok(Line::TooLong);
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(at) => {
                source.consume(at + 1);
                return Ok(Line::TooLong);
            }
            None => {
                let len = buf.len();
                source.consume(len);
            }
        }
    }
}

/// A HAR's `log.entries`, one entry at a time, never the whole document in memory. A document
/// that breaks off (or is no HAR) ends the stream with a problem saying where.
fn har(source: Source, out: &mut Chunker) {
    let mut entries = Entries { out, read: 0 };
    let mut de = serde_json::Deserializer::from_reader(source);
    let document = Only {
        key: "log",
        seed: Only {
            key: "entries",
            seed: List(&mut entries),
        },
    };
    let read = document.deserialize(&mut de).and_then(|()| de.end());
    if let Err(e) = read {
        let index = entries.read;
        let reason = format!("not a HAR file from here on: {e}");
        entries.out.push(Item::Problem(Problem { index, reason }));
    }
}

struct Entries<'o> {
    out: &'o mut Chunker,
    /// Entries read so far.
    read: usize,
}

/// An object whose `key` is read with `seed` (it must be there), every other key skipped:
/// the document's `log`, then `log`'s `entries`.
struct Only<S> {
    key: &'static str,
    seed: S,
}

/// `log.entries`: each entry handed on as it is parsed.
struct List<'e, 'o>(&'e mut Entries<'o>);

impl<'de, S: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for Only<S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: DeserializeSeed<'de, Value = ()>> Visitor<'de> for Only<S> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "an object with `{}`", self.key)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seed = Some(self.seed);
        while let Some(key) = map.next_key::<String>()? {
            match seed.take_if(|_| key == self.key) {
                Some(seed) => map.next_value_seed(seed)?,
                None => map.next_value::<IgnoredAny>().map(drop)?,
            }
        }
        match seed {
            None => Ok(()),
            Some(_) => Err(serde::de::Error::missing_field(self.key)),
        }
    }
}

impl<'de> DeserializeSeed<'de> for List<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for List<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("`log.entries`: a list")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(entry) = seq.next_element::<Value>()? {
            let index = self.0.read;
            self.0.read += 1;
            let item = match har_exchange(index, &entry) {
                Ok(exchange) => Item::Exchange(exchange),
                Err(reason) => Item::Problem(Problem { index, reason }),
            };
            if !self.0.out.push(item) {
                return Err(serde::de::Error::custom("the reader stopped"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn items(bytes: &[u8]) -> (Format, Vec<Item>) {
        let stream = Stream::from_reader(
            decompressed(Box::new(Cursor::new(bytes.to_vec()))).unwrap(),
            None,
        )
        .unwrap();
        let format = stream.format;
        (format, stream.flatten().collect())
    }

    #[test]
    fn an_endless_line_is_a_problem_and_the_next_line_is_read() {
        let good = br#"{"method":"GET","url":"/api/v1/channels/7"}"#;
        let mut bytes = good.to_vec();
        bytes.push(b'\n');
        bytes.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        bytes.push(b'\n');
        bytes.extend_from_slice(good);
        let (_, items) = items(&bytes);
        let kinds: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Exchange(e) => format!("exchange {}", e.index),
                Item::Problem(p) => format!("problem {}: {}", p.index, p.reason),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "exchange 0",
                "problem 1: a line longer than 64 MiB, skipped",
                "exchange 2"
            ]
        );
    }

    /// Issue 34, defect 6: the format is told from at most [`HEAD`] bytes, whatever the first
    /// line's length (reading the whole first line took 1.85 GB for 1 GiB of NULs), and from
    /// the first line that is not blank (a blank one made a JSON Lines file read as HAR).
    #[test]
    fn the_format_is_told_from_a_bounded_head_and_the_first_line_that_is_not_blank() {
        let mut endless: Source = Box::new(BufReader::new(std::io::repeat(0)));
        assert_eq!(head(&mut endless).unwrap().len(), HEAD);
        let mut blank_then_endless: Source = Box::new(BufReader::new(
            Cursor::new(b"\n \n\r\n".to_vec()).chain(std::io::repeat(b' ')),
        ));
        assert_eq!(head(&mut blank_then_endless).unwrap().len(), HEAD);

        let line = br#"{"method":"GET","url":"/api/v1/channels/7"}"#;
        let blank_first = [&b"\n  \n"[..], line, b"\n", line, b"\n"].concat();
        let (format, read) = items(&blank_first);
        assert_eq!(format, Format::Jsonl);
        assert_eq!(exchanges(&read).len(), 2);
        assert!(problems(&read).is_empty());

        // A first line longer than the head is told by its first key.
        let body = "x".repeat(2 * HEAD);
        let long = format!(r#"{{"method":"PUT","url":"/api/v1/channels/7","body":"{body}"}}"#);
        let (format, read) = items(format!("{long}\n").as_bytes());
        assert_eq!((format, exchanges(&read).len()), (Format::Jsonl, 1));
        let har = HAR.replace('\n', " ").replacen(
            r#"{"log":{"#,
            &format!(r#"{{"log":{{"comment":"{body}","#),
            1,
        );
        let (format, read) = items(har.as_bytes());
        assert_eq!(
            (format, exchanges(&read).len()),
            (Format::Har, exchanges(&items(HAR.as_bytes()).1).len())
        );
        assert_eq!(
            detect(b"{", false),
            Format::Har,
            "a pretty-printed HAR's first line"
        );
    }

    fn exchanges(items: &[Item]) -> Vec<&Exchange> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Exchange(e) => Some(e),
                Item::Problem(_) => None,
            })
            .collect()
    }

    fn problems(items: &[Item]) -> Vec<(usize, &str)> {
        items
            .iter()
            .filter_map(|i| match i {
                Item::Problem(p) => Some((p.index, p.reason.as_str())),
                Item::Exchange(_) => None,
            })
            .collect()
    }

    #[test]
    fn jsonl_lines_with_a_broken_one_and_a_line_that_is_not_utf8() {
        let mut text = concat!(
            r#"{"method":"put","url":"/a/7?x=1","headers":{"content-type":"application/json"},"body":{"n":1}}"#,
            "\n",
            "{not json\n",
            "\n",
            r#"{"method":"GET","url":"https://h.test/a","body_text":"raw","response":{"status":200,"body":[1]}}"#,
            "\n",
            r#"{"url":"/a"}"#,
            "\n",
        )
        .as_bytes()
        .to_vec();
        text.extend_from_slice(b"\xff\xfe\n");
        let (format, items) = items(&text);
        assert_eq!(format, Format::Jsonl);
        let e = exchanges(&items);
        assert_eq!((e.len(), e[0].index, e[0].method.as_str()), (2, 0, "PUT"));
        assert_eq!(e[0].body.as_deref(), Some(&br#"{"n":1}"#[..]));
        assert_eq!(e[1].index, 3);
        assert_eq!(
            e[1].response.as_ref().unwrap().body.as_deref(),
            Some(&b"[1]"[..])
        );
        let p = problems(&items);
        assert_eq!(
            (p.len(), p[0].0, p[1]),
            (3, 1, (4, "missing string `method`"))
        );
        assert_eq!(p[2].0, 5, "the line that is not UTF-8");
    }

    const HAR: &str = r#"{"log":{"version":"1.2","creator":{"name":"t"},"entries":[
        {"request":{"method":"PUT","url":"http://h.test/a","headers":[{"name":"X-A","value":"1"}],
          "postData":{"mimeType":"application/json","text":"{\"a\":1}"}},
         "response":{"status":200,"headers":[],"content":{"mimeType":"application/json","text":"e30=","encoding":"base64"}}},
        {"response":{}},
        {"request":{"method":"GET","url":"/b","headers":[]},"response":{"status":200,"headers":[],
          "content":{"mimeType":"application/json","text":"not base64!","encoding":"base64"}}}],
        "pages":[]}}"#;

    #[test]
    fn har_entries_one_at_a_time_with_base64_bodies_decoded() {
        for text in [HAR.to_string(), HAR.replace('\n', " ")] {
            let (format, items) = items(text.as_bytes());
            assert_eq!(format, Format::Har);
            let e = exchanges(&items);
            assert_eq!(
                e[0].headers,
                [
                    ("X-A".into(), "1".into()),
                    ("content-type".into(), "application/json".into())
                ]
            );
            let response = e[0].response.as_ref().unwrap();
            assert_eq!(
                (response.status, response.body.as_deref()),
                (200, Some(&b"{}"[..]))
            );
            let p = problems(&items);
            assert_eq!(p[0], (1, "entry has no `request`"));
            assert!(
                p[1].0 == 2 && p[1].1.starts_with("a base64 body that does not decode"),
                "{p:?}"
            );
        }
    }

    #[test]
    fn a_har_that_breaks_off_keeps_what_came_before() {
        let cut = &HAR[..HAR.find("{\"response\":{}}").unwrap() + 20];
        let (_, items) = items(cut.as_bytes());
        assert_eq!(exchanges(&items).len(), 1);
        let p = problems(&items);
        assert!(
            p.iter()
                .any(|(i, r)| *i == 2 && r.starts_with("not a HAR file from here on")),
            "{p:?}"
        );
        let (_, items) = items_of_json(
            r#"{"version": 1,
            "entries": []}"#,
        );
        assert!(problems(&items)[0].1.contains("missing field `log`"));
    }

    fn items_of_json(text: &str) -> (Format, Vec<Item>) {
        items(text.as_bytes())
    }

    #[test]
    fn gzip_is_read_by_its_first_bytes_whatever_the_name() {
        let line = br#"{"method":"GET","url":"/a"}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        for _ in 0..3 {
            gz.write_all(line).unwrap();
            gz.write_all(b"\n").unwrap();
        }
        let (format, items) = items(&gz.finish().unwrap());
        assert_eq!((format, exchanges(&items).len()), (Format::Jsonl, 3));
    }
}

//! src/ is built in floors that import only downward (docs/design.md, Layout): this test reads
//! every file's imports (`use` trees and inline `crate::`/`super::`/`self::` paths, and paths
//! through the modules those imports name) and fails, naming file:line, on
//! - an import of a floor above the file's own;
//! - an import between two rooms of one floor (the homes of counters: `standalone/` and
//!   `layer/` do not know each other; the layer's capabilities side by side, such as `wait/`
//!   and `trigger/`, neither);
//! - a circle of files importing each other;
//! - a file in no floor (a new file must be given one here);
//! - anything but module declarations and re-exports in the crate root.
//!
//! A folder's `mod.rs` may re-export its files: a path through a re-export counts as an import
//! of the file that defines the item, and the re-export itself is checked against the floors
//! but is no edge of a circle. `#[macro_export]` macros count as imports of their file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floors of src/, lowest first, each with its rooms (path prefixes below src/). A file may
/// import its own room and the floors below.
const FLOORS: &[(&str, &[&[&str]])] = &[
    ("the engine", &[&["engine/"]]),
    ("the C boundary", &[&["boundary/"]]),
    ("rdma-core", &[&["verbs/"]]),
    ("the counter fid", &[&["cntr/"]]),
    (
        "what binding a counter asks of the layer's capabilities",
        &[&["layer/hooks.rs"]],
    ),
    (
        "the shm doorbell, which bound waits sleep on",
        &[&["layer/doorbell/"]],
    ),
    (
        "the layer's capabilities: bound waits; counter-driven work",
        &[&["layer/wait/"], &["layer/trigger/"]],
    ),
    (
        "the layer's capabilities on those: remote-access counters; automatic progress",
        &[&["layer/rma_event/"], &["layer/progress/"]],
    ),
    ("the homes of counters", &[&["standalone/"], &["layer/"]]),
    ("the provider", &[&["prov.rs", "info.rs", "ext.rs"]]),
];

/// The crate root: module declarations and re-exports only, in no floor.
const ROOT: &str = "lib.rs";

#[test]
fn src_imports_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&src, &src, &mut files);
    let errors = check(&files);
    assert!(
        errors.is_empty(),
        "imports that break the floors of src/ (see docs/design.md, Layout):\n{}",
        errors.join("\n")
    );
}

/// The check itself must catch what it is there for.
#[test]
fn the_check_catches_upward_imports_circles_and_crossed_rooms() {
    let tree = |extra: &[(&str, &str)]| {
        let mut files: BTreeMap<String, String> = [
            ("lib.rs", "pub mod engine; mod boundary; mod cntr; mod layer; mod standalone; mod prov;"),
            ("engine/mod.rs", "pub mod store; pub use store::Store;"),
            ("engine/store.rs", "pub trait Store {}"),
            ("boundary/mod.rs", "pub mod log; pub mod ffi;"),
            ("boundary/log.rs", "use crate::engine::Store; // use crate::prov::NAME;\nfn f() { let s = \"crate::prov::NAME\"; }"),
            ("boundary/ffi.rs", "use super::log;"),
            ("cntr/mod.rs", "mod open; pub use open::open_in;"),
            ("cntr/open.rs", "use crate::boundary::ffi; pub fn open_in() {}"),
            ("standalone/mod.rs", "mod domain;"),
            ("standalone/domain.rs", "use crate::cntr::{self, open_in};\nfn f() { cntr::open_in(); }"),
            (
                "layer/mod.rs",
                "mod domain; mod fabric; mod home; mod hooks; mod wait; mod trigger; mod rma_event; \
                 mod progress;",
            ),
            ("layer/home.rs", "use crate::cntr;"),
            ("layer/hooks.rs", "use crate::cntr;"),
            ("layer/domain.rs", "use crate::cntr;\nuse super::{rma_event, wait::Feed};"),
            ("layer/wait/mod.rs", "mod feed; pub use feed::Feed;"),
            ("layer/wait/feed.rs", "use crate::layer::hooks; pub struct Feed;"),
            ("layer/trigger/mod.rs", "pub mod op; pub mod work;"),
            ("layer/trigger/op.rs", "use crate::cntr;"),
            ("layer/trigger/work.rs", "use crate::engine::Store;"),
            ("layer/rma_event/mod.rs", "use crate::layer::{trigger::work, wait::Feed};"),
            ("layer/progress/mod.rs", "use super::trigger::work;"),
            ("layer/fabric.rs", "use super::domain;"),
            ("prov.rs", "pub const NAME: &str = \"rscntr\"; use crate::{layer, standalone};"),
        ]
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
        for (path, text) in extra {
            files.insert(path.to_string(), text.to_string());
        }
        check(&files)
    };
    assert_eq!(tree(&[]), Vec::<String>::new(), "the clean tree passes");

    // Each planted change must give exactly one error, containing every one of `want`.
    let expect = |planted: &[(&str, &str)], want: &[&str]| {
        let errors = tree(planted);
        assert!(
            errors.len() == 1 && want.iter().all(|w| errors[0].contains(w)),
            "planted {planted:?}: want one error with {want:?}, got {errors:?}"
        );
    };
    expect(
        &[(
            "boundary/log.rs",
            "use crate::engine::Store;\nuse crate::prov::NAME;",
        )],
        &["src/boundary/log.rs:2: ", "runs up"],
    );
    expect(
        &[("cntr/open.rs", "pub fn open_in() { crate::layer::f(); }")],
        &["src/cntr/open.rs:1: ", "runs up"],
    );
    expect(
        &[(
            "layer/fabric.rs",
            "use super::domain;\nuse crate::standalone;",
        )],
        &["src/layer/fabric.rs:2: ", "room"],
    );
    expect(
        &[(
            "layer/domain.rs",
            "use crate::cntr;\nfn f() { super::fabric::g(); }",
        )],
        &["circle", "src/layer/domain.rs:2", "src/layer/fabric.rs:1"],
    );
    // The layer's capabilities: none imports the interposition above it, nor a room of its own
    // floor, nor a floor above.
    expect(
        &[(
            "layer/wait/feed.rs",
            "use crate::layer::hooks; pub struct Feed;\nfn f() { crate::layer::home::g(); }",
        )],
        &["src/layer/wait/feed.rs:2: ", "runs up", "src/layer/home.rs"],
    );
    expect(
        &[(
            "layer/trigger/work.rs",
            "use crate::engine::Store;\nuse crate::layer::wait::Feed;",
        )],
        &[
            "src/layer/trigger/work.rs:2: ",
            "room",
            "src/layer/wait/feed.rs",
        ],
    );
    expect(
        &[(
            "layer/progress/mod.rs",
            "use super::trigger::work;\nuse super::rma_event;",
        )],
        &[
            "src/layer/progress/mod.rs:2: ",
            "room",
            "src/layer/rma_event/mod.rs",
        ],
    );
    expect(
        &[(
            "layer/trigger/op.rs",
            "use crate::cntr;\nuse super::super::progress;",
        )],
        &[
            "src/layer/trigger/op.rs:2: ",
            "runs up",
            "src/layer/progress/mod.rs",
        ],
    );
    expect(
        &[(
            "layer/hooks.rs",
            "use crate::cntr;\nuse super::trigger::op;",
        )],
        &[
            "src/layer/hooks.rs:2: ",
            "runs up",
            "src/layer/trigger/op.rs",
        ],
    );
    expect(&[("util.rs", "")], &["src/util.rs: ", "no floor"]);
    expect(
        &[("lib.rs", "mod engine; use crate::prov::NAME;")],
        &["src/lib.rs:1: ", "root"],
    );
}

fn read_tree(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_tree(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            files.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// (floor, room) of a file, by the longest matching prefix.
fn place(file: &str) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for (f, (_, rooms)) in FLOORS.iter().enumerate() {
        for (r, prefixes) in rooms.iter().enumerate() {
            for p in prefixes.iter() {
                let hit = if p.ends_with('/') {
                    file.starts_with(p)
                } else {
                    file == *p
                };
                if hit && best.is_none_or(|(_, _, len)| p.len() > len) {
                    best = Some((f, r, p.len()));
                }
            }
        }
    }
    best.map(|(f, r, _)| (f, r))
}

/// The module path of a file: `a/b.rs` and `a/b/mod.rs` are `a::b`, lib.rs is the root.
fn module_of(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap();
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    if stem == "lib" {
        return Vec::new();
    }
    stem.split('/').map(str::to_owned).collect()
}

struct Import {
    line: usize,
    /// The path as written, for the message.
    text: String,
    target: String,
    reexport: bool,
}

fn check(files: &BTreeMap<String, String>) -> Vec<String> {
    let modules: BTreeMap<Vec<String>, String> =
        files.keys().map(|f| (module_of(f), f.clone())).collect();
    let tokens: BTreeMap<&String, Vec<Token>> =
        files.iter().map(|(f, s)| (f, tokenize(s))).collect();
    let mut macros = BTreeMap::new();
    for (file, toks) in &tokens {
        for (i, t) in toks.iter().enumerate() {
            if t.text == "macro_rules"
                && toks[..i]
                    .iter()
                    .rev()
                    .take(8)
                    .any(|t| t.text == "macro_export")
                && let Some(name) = toks.get(i + 2)
            {
                macros.insert(name.text.clone(), (*file).clone());
            }
        }
    }
    let mut uses = BTreeMap::new();
    for (file, toks) in &tokens {
        uses.insert((*file).clone(), parse_uses(toks));
    }
    let resolver = Resolver {
        modules: &modules,
        uses: &uses,
        macros: &macros,
    };

    let mut errors = Vec::new();
    let mut edges: BTreeMap<String, Vec<Import>> = BTreeMap::new();
    for (file, toks) in &tokens {
        let here = module_of(file);
        let mut imports = Vec::new();
        // Local names of modules brought in by `use`, for inline paths through them.
        let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in &uses[*file] {
            if let Some(abs) = resolver.absolute(&here, &u.path) {
                if resolver.modules.contains_key(&abs) {
                    aliases.insert(u.name.clone(), abs.clone());
                }
                if let Some(target) = resolver.file_of(&abs, 0) {
                    imports.push(Import {
                        line: u.line,
                        text: u.path.join("::"),
                        target,
                        reexport: u.reexport,
                    });
                }
            }
        }
        for (line, path) in inline_paths(toks, &aliases) {
            let abs = match aliases.get(&path[0]) {
                Some(m) if !["crate", "super", "self"].contains(&path[0].as_str()) => {
                    m.iter().cloned().chain(path[1..].iter().cloned()).collect()
                }
                _ => match resolver.absolute(&here, &path) {
                    Some(abs) => abs,
                    None => continue,
                },
            };
            if let Some(target) = resolver.file_of(&abs, 0) {
                imports.push(Import {
                    line,
                    text: path.join("::"),
                    target,
                    reexport: false,
                });
            }
        }
        imports.retain(|i| i.target != **file);
        if *file == ROOT {
            for i in imports.iter().filter(|i| !i.reexport) {
                errors.push(format!(
                    "src/{file}:{}: `{}`: the crate root only declares modules and re-exports",
                    i.line, i.text
                ));
            }
        } else {
            match place(file) {
                None => errors.push(format!(
                    "src/{file}: in no floor (add it to FLOORS in tests/layout.rs and to the \
                     docs/design.md, Layout)"
                )),
                Some((floor, room)) => {
                    for i in &imports {
                        let Some((tf, tr)) = place(&i.target) else {
                            continue;
                        };
                        if tf > floor {
                            errors.push(format!(
                                "src/{file}:{}: `{}` runs up, from {} to {} (src/{})",
                                i.line, i.text, FLOORS[floor].0, FLOORS[tf].0, i.target
                            ));
                        } else if tf == floor && tr != room {
                            errors.push(format!(
                                "src/{file}:{}: `{}` crosses from one room of {} to another \
                                 (src/{})",
                                i.line, i.text, FLOORS[floor].0, i.target
                            ));
                        }
                    }
                }
            }
        }
        edges.insert((*file).clone(), imports);
    }
    for circle in circles(&edges) {
        let steps: Vec<String> = circle
            .iter()
            .map(|(from, i)| format!("src/{from}:{} `{}`", i.line, i.text))
            .collect();
        let back = &circle[0].0;
        errors.push(format!(
            "a circle of imports: {} -> back to src/{back}",
            steps.join(" -> ")
        ));
    }
    errors
}

struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, String>,
    uses: &'a BTreeMap<String, Vec<Use>>,
    macros: &'a BTreeMap<String, String>,
}

impl Resolver<'_> {
    /// The absolute module path of `path` written in module `here`; None for other crates.
    fn absolute(&self, here: &[String], path: &[String]) -> Option<Vec<String>> {
        let mut base: Vec<String> = here.to_vec();
        let mut rest = path;
        match path.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &path[1..];
            }
            Some("self") => rest = &path[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                // A name in scope: a child module, or another crate.
                let mut child = base.clone();
                child.push(first.to_owned());
                if !self.modules.contains_key(&child) {
                    return None;
                }
            }
            None => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what `abs` names: the deepest module file on the path, through
    /// re-exports of the module it stops in and `#[macro_export]` macros at the root.
    fn file_of(&self, abs: &[String], depth: usize) -> Option<String> {
        let mut module: Vec<String> = Vec::new();
        for (i, seg) in abs.iter().enumerate() {
            let mut child = module.clone();
            child.push(seg.clone());
            if self.modules.contains_key(&child) {
                module = child;
                continue;
            }
            if i == 0
                && let Some(file) = self.macros.get(seg)
            {
                return Some(file.clone());
            }
            let file = &self.modules[&module];
            if depth < 8
                && let Some(u) = self.uses[file]
                    .iter()
                    .find(|u| u.reexport && u.name == *seg)
            {
                let target = self.absolute(&module, &u.path)?;
                let full: Vec<String> = target
                    .into_iter()
                    .chain(abs[i + 1..].iter().cloned())
                    .collect();
                return self.file_of(&full, depth + 1);
            }
            return Some(file.clone());
        }
        self.modules.get(&module).cloned()
    }
}

/// Circles among files, over imports that are not re-exports: one shortest circle through each
/// set of files that reach each other, as the imports that close it.
fn circles(edges: &BTreeMap<String, Vec<Import>>) -> Vec<Vec<(String, &Import)>> {
    let names: Vec<&String> = edges.keys().collect();
    let index: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    // For each file, the first import (by line) of each file it imports.
    let succ: Vec<BTreeMap<usize, &Import>> = names
        .iter()
        .map(|n| {
            let mut first = BTreeMap::new();
            for i in edges[*n].iter().filter(|i| !i.reexport) {
                if let Some(&t) = index.get(&i.target) {
                    first
                        .entry(t)
                        .and_modify(|e: &mut &Import| {
                            if i.line < e.line {
                                *e = i
                            }
                        })
                        .or_insert(i);
                }
            }
            first
        })
        .collect();
    // The shortest way from `from` to `to` (breadth first): the files after `from`, up to `to`.
    let path = |from: usize, to: usize| -> Option<Vec<usize>> {
        let mut parent: BTreeMap<usize, usize> = BTreeMap::new();
        let mut todo = std::collections::VecDeque::from([from]);
        while let Some(n) = todo.pop_front() {
            for &m in succ[n].keys() {
                if parent.contains_key(&m) {
                    continue;
                }
                parent.insert(m, n);
                if m == to {
                    let mut way = vec![m];
                    let mut k = n;
                    while k != from {
                        way.push(k);
                        k = parent[&k];
                    }
                    way.reverse();
                    return Some(way);
                }
                todo.push_back(m);
            }
        }
        None
    };
    let mut covered = BTreeSet::new();
    let mut out = Vec::new();
    for n in 0..names.len() {
        if covered.contains(&n) {
            continue;
        }
        let Some(way) = path(n, n) else { continue };
        let mut steps = Vec::new();
        let mut at = n;
        for &next in &way {
            steps.push((names[at].clone(), succ[at][&next]));
            at = next;
        }
        // Every file that reaches n and is reached from it is in this circle's set.
        for m in 0..names.len() {
            if path(n, m).is_some() && path(m, n).is_some() {
                covered.insert(m);
            }
        }
        covered.insert(n);
        out.push(steps);
    }
    out
}

#[derive(Clone, Debug)]
struct Token {
    text: String,
    line: usize,
}

/// Identifiers, `::` and single punctuation, with comments and literals left out.
fn tokenize(src: &str) -> Vec<Token> {
    let s: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(s[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' || (matches!(c, 'r' | 'b' | 'c') && string_start(&s, i).is_some()) {
            // A string, raw or not, with its prefix.
            let (open_len, hashes, raw) = string_start(&s, i).unwrap_or((1, 0, false));
            i += open_len;
            while i < s.len() {
                if s[i] == '\\' && !raw {
                    line += usize::from(s.get(i + 1) == Some(&'\n'));
                    i += 2;
                } else if s[i] == '"' && (0..hashes).all(|h| s.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                } else {
                    line += usize::from(s[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '\''), or a lifetime ('a), which is skipped.
            if next == Some('\\') {
                i += 2;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < s.len() && ident(s[i]) {
                    i += 1;
                }
            }
        } else if ident(c) {
            let start = i;
            while i < s.len() && ident(s[i]) {
                i += 1;
            }
            out.push(Token {
                text: s[start..i].iter().collect(),
                line,
            });
        } else if c == ':' && next == Some(':') {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// At `i`, the opening of a (byte, C, raw) string: (its length, the raw hashes, raw).
fn string_start(s: &[char], i: usize) -> Option<(usize, usize, bool)> {
    let mut j = i;
    if matches!(s.get(j), Some('b' | 'c')) {
        j += 1;
    }
    let raw = s.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let mut hashes = 0;
    while raw && s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    // Only a prefix directly before the quote makes a string (not an identifier like `br`).
    if s.get(j) == Some(&'"') && (i == 0 || !(s[i - 1].is_alphanumeric() || s[i - 1] == '_')) {
        Some((j + 1 - i, hashes, raw))
    } else {
        None
    }
}

/// One name a `use` brings in: its path, the name it goes by, and whether it is re-exported.
#[derive(Debug)]
struct Use {
    path: Vec<String>,
    name: String,
    line: usize,
    reexport: bool,
}

fn parse_uses(toks: &[Token]) -> Vec<Use> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i].text == "use" {
            let reexport = is_pub(toks, i);
            let mut j = i + 1;
            if toks.get(j).is_some_and(|t| t.text == "::") {
                j += 1;
            }
            use_tree(toks, &mut j, &[], reexport, &mut out);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// `pub use` or `pub(…) use`.
fn is_pub(toks: &[Token], use_at: usize) -> bool {
    match use_at.checked_sub(1).map(|k| toks[k].text.as_str()) {
        Some("pub") => true,
        Some(")") => toks[..use_at]
            .iter()
            .rposition(|t| t.text == "(")
            .is_some_and(|open| open > 0 && toks[open - 1].text == "pub"),
        _ => false,
    }
}

fn use_tree(toks: &[Token], j: &mut usize, prefix: &[String], reexport: bool, out: &mut Vec<Use>) {
    let mut path = prefix.to_vec();
    loop {
        let Some(t) = toks.get(*j) else { return };
        match t.text.as_str() {
            "{" => {
                *j += 1;
                while toks.get(*j).is_some_and(|t| t.text != "}") {
                    use_tree(toks, j, &path, reexport, out);
                    if toks.get(*j).is_some_and(|t| t.text == ",") {
                        *j += 1;
                    }
                }
                *j += 1;
                return;
            }
            "*" => {
                *j += 1;
                out.push(Use {
                    name: "*".into(),
                    line: t.line,
                    path,
                    reexport,
                });
                return;
            }
            "self" if !path.is_empty() => {
                *j += 1;
                let name = alias(toks, j).unwrap_or_else(|| path.last().unwrap().clone());
                out.push(Use {
                    path,
                    name,
                    line: t.line,
                    reexport,
                });
                return;
            }
            text if text.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                path.push(text.to_owned());
                *j += 1;
                if toks.get(*j).is_some_and(|t| t.text == "::") {
                    *j += 1;
                    continue;
                }
                let name = alias(toks, j).unwrap_or_else(|| text.to_owned());
                out.push(Use {
                    path,
                    name,
                    line: t.line,
                    reexport,
                });
                return;
            }
            _ => return,
        }
    }
}

/// `as name`, if there.
fn alias(toks: &[Token], j: &mut usize) -> Option<String> {
    if toks.get(*j).is_some_and(|t| t.text == "as") {
        let name = toks.get(*j + 1)?.text.clone();
        *j += 2;
        return Some(name);
    }
    None
}

/// Paths in code (outside `use`) that start with `crate::`, `super::`, `self::` or a module
/// alias: (line, segments up to the first that is not followed by `::` and a name).
fn inline_paths(
    toks: &[Token],
    aliases: &BTreeMap<String, Vec<String>>,
) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_use = false;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i].text;
        if t == "use" {
            in_use = true;
        } else if t == ";" {
            in_use = false;
        }
        let starts = (t == "crate" || t == "super" || t == "self" || aliases.contains_key(t))
            && toks.get(i + 1).is_some_and(|n| n.text == "::")
            && !(i > 0 && (toks[i - 1].text == "$" || toks[i - 1].text == "::"));
        if in_use || !starts {
            i += 1;
            continue;
        }
        let line = toks[i].line;
        let mut path = vec![t.clone()];
        let mut j = i + 1;
        while toks.get(j).is_some_and(|n| n.text == "::")
            && toks
                .get(j + 1)
                .is_some_and(|n| n.text.chars().all(|c| c.is_alphanumeric() || c == '_'))
        {
            path.push(toks[j + 1].text.clone());
            j += 2;
        }
        out.push((line, path));
        i = j;
    }
    out
}

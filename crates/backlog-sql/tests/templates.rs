#![allow(missing_docs)]
//! SQL variant families from one source. A statement that comes in variants (FIFO and LIFO,
//! kept and deleted completions, one lease token or one per job, …) is written once, as a
//! template under `crates/backlog-sql/templates/<dialect>/`, and its variants are files of the
//! catalog (`queries/<dialect>/`) like any other, each the statement exactly as it runs, so
//! `build.rs`, the rendered catalog, `docs/sql.md` and the clients read them as before. This test
//! fails when a generated file differs from what its template gives;
//! `BACKLOG_BLESS=1 cargo test -p backlog-sql --test templates` writes them.
//!
//! A template is a statement file with these lines (each a comment line of its own; they do not
//! reach the output):
//!
//! - `-- @name PATTERN`: the variants' file names, `{AXIS}` standing for the value's name part;
//! - `-- @axis AXIS: VALUE, VALUE=PART, …`: one axis of variants, each value with the part it
//!   gives the name (the value itself unless `=PART` says otherwise; `=` alone gives nothing).
//!   A template gives one variant per combination of its axes' values, in the order declared;
//! - `-- @skip COND`: the combinations for which `COND` (as in `@if`, below) holds give no
//!   variant;
//! - `-- @set AXIS=VALUE`: an axis of one value, not in the name (for a fragment that another
//!   template includes with more values);
//! - `-- @if COND` … `-- @elif COND` … `-- @else` … `-- @end`: lines for some variants only.
//!   `COND` is one or more `AXIS=VALUE|VALUE` or `AXIS!=VALUE|VALUE`, all of which must hold;
//! - `-- @include FRAGMENT`: the lines of `templates/<dialect>/_FRAGMENT.sql`, indented as the
//!   `@include` line is, with the same `@if`s evaluated for the variant.
//!
//! A line `--# …` is a note on the template itself, left out of every variant.
//!
//! `@include` may bind names for the fragment: `-- @include FRAGMENT p=j.` (`{{p}}` in it is `j.`).
//!
//! In the other lines, `{{AXIS}}` is the axis' value, `{{? COND : TEXT}}` is `TEXT` where `COND`
//! holds and nothing elsewhere, and `${NAME}` the placeholder of the
//! parameter `NAME` (`$n` on PostgreSQL, `?n` on SQLite: the position of its `-- @param` line
//! among the variant's), so that a variant with a parameter more numbers the others as its file
//! must. Each generated file opens with a `-- @generated` line naming its template.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DIALECTS: [&str; 3] = ["postgres", "mysql", "sqlite"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[derive(Debug)]
struct Axis {
    name: String,
    /// Each value and the part of the file name it gives.
    values: Vec<(String, String)>,
    /// Set by `@set`: one value, for the fragments a template shares with others.
    fixed: bool,
}

#[derive(Debug)]
struct Template {
    name: String,
    axes: Vec<Axis>,
    /// `@skip` conditions: the combinations that give no variant.
    skip: Vec<String>,
    lines: Vec<String>,
}

/// The template's declarations and its body.
fn parse(text: &str) -> Result<Template, String> {
    let mut name = None;
    let mut axes = Vec::new();
    let mut skip = Vec::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let c = line.trim_start().strip_prefix("--").map(str::trim);
        if let Some(rest) = c.and_then(|c| c.strip_prefix("@name ")) {
            if name.replace(rest.trim().to_owned()).is_some() {
                return Err("`@name` twice".into());
            }
        } else if let Some(rest) = c.and_then(|c| c.strip_prefix("@skip ")) {
            skip.push(rest.trim().to_owned());
        } else if let Some(rest) = c.and_then(|c| c.strip_prefix("@set ")) {
            let (axis, value) = rest.split_once('=').ok_or("`@set AXIS=VALUE`")?;
            let (axis, value) = (axis.trim().to_owned(), value.trim().to_owned());
            if value.is_empty() || axes.iter().any(|a: &Axis| a.name == axis) {
                return Err(format!(
                    "`@set {rest}`: a value, and an axis not declared before"
                ));
            }
            axes.push(Axis {
                name: axis,
                values: vec![(value, String::new())],
                fixed: true,
            });
        } else if let Some(rest) = c.and_then(|c| c.strip_prefix("@axis ")) {
            let (axis, values) = rest.split_once(':').ok_or("`@axis AXIS: VALUE, …`")?;
            let axis = axis.trim().to_owned();
            let values: Vec<(String, String)> = values
                .split(',')
                .map(|v| match v.split_once('=') {
                    Some((v, part)) => (v.trim().to_owned(), part.trim().to_owned()),
                    None => (v.trim().to_owned(), v.trim().to_owned()),
                })
                .collect();
            if values.iter().any(|(v, _)| v.is_empty()) || values.len() < 2 {
                return Err(format!("axis `{axis}`: two values or more, none empty"));
            }
            if axes.iter().any(|a: &Axis| a.name == axis) {
                return Err(format!("axis `{axis}` declared twice"));
            }
            axes.push(Axis {
                name: axis,
                values,
                fixed: false,
            });
        } else {
            lines.push(line.to_owned());
        }
    }
    let name = name.ok_or("no `-- @name PATTERN` line")?;
    for a in axes.iter().filter(|a| !a.fixed) {
        if !name.contains(&format!("{{{}}}", a.name)) {
            return Err(format!("`@name {name}` does not name axis `{}`", a.name));
        }
    }
    Ok(Template {
        name,
        axes,
        skip,
        lines,
    })
}

/// Whether `cond` holds for the variant `at`.
fn holds(cond: &str, at: &Vars) -> Result<bool, String> {
    let mut all = true;
    let terms: Vec<&str> = cond.split_whitespace().collect();
    if terms.is_empty() {
        return Err("an empty condition".into());
    }
    for term in terms {
        let (axis, values, negated) = match term.split_once("!=") {
            Some((a, v)) => (a, v, true),
            None => {
                let (a, v) = term
                    .split_once('=')
                    .ok_or_else(|| format!("`{term}`: AXIS=VALUE|VALUE"))?;
                (a, v, false)
            }
        };
        let value = at
            .get(axis)
            .ok_or_else(|| format!("`{term}`: no axis `{axis}`"))?;
        let values: Vec<&str> = values.split('|').collect();
        if values.iter().any(|v| v.is_empty()) {
            return Err(format!("`{term}`: an empty value"));
        }
        all &= values.contains(&value.as_str()) != negated;
    }
    Ok(all)
}

/// One `@if` level: whether its lines are kept, and whether a branch of it was taken.
struct Level {
    keep: bool,
    taken: bool,
    outer: bool,
}

/// A variant's values: each axis' (and each `@include` binding's).
type Vars = BTreeMap<String, String>;

/// `line` with its `{{AXIS}}` and `{{? COND : TEXT}}` written out for `at`.
fn fill(line: &str, at: &Vars) -> Result<String, String> {
    let mut line = line.to_owned();
    for (axis, value) in at {
        line = line.replace(&format!("{{{{{axis}}}}}"), value);
    }
    while let Some(start) = line.find("{{?") {
        let len = line[start..]
            .find("}}")
            .ok_or_else(|| format!("`{}`: `{{{{?` without `}}}}`", line.trim()))?;
        let inner = &line[start + 3..start + len];
        let (cond, text) = inner
            .split_once(':')
            .ok_or_else(|| format!("`{}`: {{{{? COND : TEXT}}}}", line.trim()))?;
        let text = if holds(cond, at)? {
            text.strip_prefix(' ').unwrap_or(text).to_owned()
        } else {
            String::new()
        };
        line.replace_range(start..start + len + 2, &text);
    }
    if line.contains("{{") {
        return Err(format!("`{}`: no such axis", line.trim()));
    }
    Ok(line)
}

/// The template's lines as variant `at` has them (`@if`s resolved, fragments included, `{{…}}`
/// written out).
fn select(
    lines: &[String],
    at: &Vars,
    dir: &Path,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), String> {
    if depth > 4 {
        return Err("fragments include each other too deep".into());
    }
    let mut stack: Vec<Level> = Vec::new();
    let keeping = |stack: &[Level]| stack.last().is_none_or(|l| l.keep);
    for line in lines {
        if line.trim_start().starts_with("--#") {
            continue;
        }
        let c = line
            .trim_start()
            .strip_prefix("--")
            .map(str::trim)
            .unwrap_or("");
        if let Some(cond) = c.strip_prefix("@if ") {
            let outer = keeping(&stack);
            let keep = outer && holds(cond, at)?;
            stack.push(Level {
                keep,
                taken: keep,
                outer,
            });
        } else if let Some(cond) = c.strip_prefix("@elif ") {
            let l = stack.last_mut().ok_or("`@elif` without `@if`")?;
            let h = holds(cond, at)?;
            l.keep = l.outer && !l.taken && h;
            l.taken |= l.keep;
        } else if c == "@else" {
            let l = stack.last_mut().ok_or("`@else` without `@if`")?;
            l.keep = l.outer && !l.taken;
            l.taken = true;
        } else if c == "@end" {
            stack.pop().ok_or("`@end` without `@if`")?;
        } else if !keeping(&stack) {
        } else if let Some(rest) = c.strip_prefix("@include ") {
            let mut words = rest.split_whitespace();
            let fragment = words.next().ok_or("`@include FRAGMENT`")?;
            let mut inner = at.clone();
            for w in words {
                let (k, v) = w
                    .split_once('=')
                    .ok_or_else(|| format!("`@include {rest}`: KEY=VALUE after the name"))?;
                inner.insert(k.to_owned(), v.to_owned());
            }
            let path = dir.join(format!("_{fragment}.sql"));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("@include {}: {e}", path.display()))?;
            let indent = &line[..line.len() - line.trim_start().len()];
            let body: Vec<String> = text
                .lines()
                .map(|l| {
                    if l.is_empty() {
                        String::new()
                    } else {
                        format!("{indent}{l}")
                    }
                })
                .collect();
            select(&body, &inner, dir, depth + 1, out)?;
        } else if c.starts_with("@if")
            || c.starts_with("@el")
            || c.starts_with("@end")
            || c.starts_with("@include")
        {
            return Err(format!("`{}`: malformed", line.trim()));
        } else {
            out.push(fill(line, at)?);
        }
    }
    if !stack.is_empty() {
        return Err("`@if` without `@end`".into());
    }
    Ok(())
}

/// `{{AXIS}}` and `${NAME}` replaced in the variant's lines. On MySQL, whose `?` bind by
/// position, a `-- @bind` line after the last `-- @param` gives the order the names came in,
/// unless it is the declared order with each parameter once.
fn substitute(lines: Vec<String>, dialect: &str) -> Result<String, String> {
    let declared = |l: &str, what: &str| -> Option<String> {
        let c = l.trim_start().strip_prefix("--")?.trim();
        let rest = c.strip_prefix(what)?;
        Some(rest.split_once(':')?.0.trim().to_owned())
    };
    let params: Vec<String> = lines
        .iter()
        .filter_map(|l| declared(l, "@param "))
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut bound: Vec<String> = Vec::new();
    for line in lines {
        let mut line = line;
        while let Some(start) = line.find("${") {
            let end = line[start..]
                .find('}')
                .ok_or_else(|| format!("`{}`: `${{` without `}}`", line.trim()))?;
            let name = line[start + 2..start + end].to_owned();
            let n =
                params.iter().position(|p| *p == name).ok_or_else(|| {
                    format!("`${{{name}}}`: no `-- @param {name}` in this variant")
                })? + 1;
            let placeholder = match dialect {
                "postgres" => format!("${n}"),
                "sqlite" => format!("?{n}"),
                _ => "?".to_owned(),
            };
            line.replace_range(start..start + end + 1, &placeholder);
            bound.push(name);
        }
        out.push(line);
    }
    if dialect == "mysql" && !bound.is_empty() && bound != params {
        if out.iter().any(|l| {
            declared(l, "@list ").is_some()
                || declared(l, "@rows ").is_some()
                || l.contains("@bind")
        }) {
            return Err("`${NAME}` with lists, rows or a `@bind` of its own: write `?`".into());
        }
        for p in &params {
            if !bound.contains(p) {
                return Err(format!("`-- @param {p}` is never bound"));
            }
        }
        let last = out
            .iter()
            .rposition(|l| declared(l, "@param ").is_some())
            .expect("a parameter");
        out.insert(last + 1, format!("-- @bind {}", bound.join(", ")));
    }
    let mut text = String::new();
    for line in out {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// Every variant of the template at `path`: its file name (without `.sql`) and its text.
fn expand(dialect: &str, path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let t = parse(&text)?;
    let dir = path.parent().expect("a folder");
    let from = format!(
        "-- @generated from templates/{dialect}/{} by tests/templates.rs: edit the template\n",
        path.file_name().unwrap().to_string_lossy()
    );
    let mut variants = Vec::new();
    let mut index = vec![0usize; t.axes.len()];
    loop {
        let at: Vars = t
            .axes
            .iter()
            .zip(&index)
            .map(|(a, &i)| (a.name.clone(), a.values[i].0.clone()))
            .collect();
        let mut skipped = false;
        for cond in &t.skip {
            skipped |= holds(cond, &at).map_err(|e| format!("@skip {cond}: {e}"))?;
        }
        let mut name = t.name.clone();
        for (a, &i) in t.axes.iter().zip(&index) {
            name = name.replace(&format!("{{{}}}", a.name), &a.values[i].1);
        }
        if !skipped {
            let mut lines = Vec::new();
            select(&t.lines, &at, dir, 0, &mut lines).map_err(|e| format!("{name}: {e}"))?;
            let body = substitute(lines, dialect).map_err(|e| format!("{name}: {e}"))?;
            variants.push((name, format!("{from}{body}")));
        }
        // The next combination, the last axis fastest.
        let mut k = t.axes.len();
        loop {
            if k == 0 {
                return Ok(variants);
            }
            k -= 1;
            index[k] += 1;
            if index[k] < t.axes[k].values.len() {
                break;
            }
            index[k] = 0;
        }
    }
}

/// The templates of a dialect (fragments, `_*.sql`, apart).
fn templates(dialect: &str) -> Vec<PathBuf> {
    let dir = root().join("templates").join(dialect);
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "sql")
                && !p.file_name().unwrap().to_string_lossy().starts_with('_')
        })
        .collect();
    files.sort();
    files
}

#[test]
fn generated_statements_are_what_their_templates_give() {
    let bless = std::env::var_os("BACKLOG_BLESS").is_some();
    let mut stale = Vec::new();
    let mut made = 0;
    for dialect in DIALECTS {
        let queries = root().join("queries").join(dialect);
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for template in templates(dialect) {
            let variants = expand(dialect, &template)
                .unwrap_or_else(|e| panic!("{}: {e}", template.display()));
            for (name, text) in variants {
                if let Some(other) = seen.insert(name.clone(), template.clone()) {
                    panic!(
                        "{dialect}/{name}.sql comes from {} and {}",
                        other.display(),
                        template.display()
                    );
                }
                let file = queries.join(format!("{name}.sql"));
                made += 1;
                if std::fs::read_to_string(&file).ok().as_deref() == Some(text.as_str()) {
                    continue;
                }
                if bless {
                    std::fs::write(&file, &text).unwrap();
                } else {
                    stale.push(format!("{dialect}/{name}.sql"));
                }
            }
        }
        // A generated file whose template no longer gives it.
        for entry in std::fs::read_dir(&queries).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if text.starts_with("-- @generated") && !seen.contains_key(&name) {
                if bless {
                    std::fs::remove_file(&path).unwrap();
                } else {
                    stale.push(format!("{dialect}/{name}.sql (no template gives it)"));
                }
            }
        }
    }
    assert!(
        made > 0,
        "no template found under {}",
        root().join("templates").display()
    );
    assert!(
        stale.is_empty(),
        "generated statements differ from their templates (edit the template, not the file; \
         then BACKLOG_BLESS=1 cargo test -p backlog-sql --test templates, and \
         python3 scripts/sql_docs.py for docs/sql.md and the clients' copies):\n{}",
        stale.join("\n")
    );
}

/// Writes `text` as a template in a fresh folder (with `fragments`), and expands it.
fn try_expand(
    dialect: &str,
    text: &str,
    fragments: &[(&str, &str)],
) -> Result<Vec<(String, String)>, String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in fragments {
        std::fs::write(dir.path().join(format!("_{name}.sql")), body).unwrap();
    }
    let path = dir.path().join("t.sql");
    std::fs::write(&path, text).unwrap();
    expand(dialect, &path).map(|v| {
        v.into_iter()
            .map(|(n, t)| (n, t.split_once('\n').unwrap().1.to_owned()))
            .collect()
    })
}

#[test]
fn a_template_gives_each_combination_with_its_own_placeholders() {
    let text = "\
-- @name claim_{retention}{tokens}_{order}
-- @axis retention: keep, delete
-- @axis tokens: many=, one=_one
-- @axis order: fifo, lifo
-- Claims ({{order}}).
-- @if retention=keep
-- @param now: i64
-- @end
--# a note on the template alone
-- @param queue: &str
SELECT id FROM backlog_job WHERE queue = ${queue}
-- @if order=fifo
ORDER BY id
-- @elif tokens=one
ORDER BY id DESC -- one
-- @else
ORDER BY id DESC
-- @end
    -- @include tail
";
    let v = try_expand(
        "postgres",
        text,
        &[("tail", "-- @if retention!=keep|x\nLIMIT 1\n-- @end")],
    )
    .unwrap();
    let names: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "claim_keep_fifo",
            "claim_keep_lifo",
            "claim_keep_one_fifo",
            "claim_keep_one_lifo",
            "claim_delete_fifo",
            "claim_delete_lifo",
            "claim_delete_one_fifo",
            "claim_delete_one_lifo"
        ]
    );
    assert_eq!(
        v[0].1,
        "-- Claims (fifo).\n-- @param now: i64\n-- @param queue: &str\n\
         SELECT id FROM backlog_job WHERE queue = $2\nORDER BY id\n"
    );
    assert_eq!(
        v[3].1,
        "-- Claims (lifo).\n-- @param now: i64\n-- @param queue: &str\n\
         SELECT id FROM backlog_job WHERE queue = $2\nORDER BY id DESC -- one\n"
    );
    assert_eq!(
        v[5].1,
        "-- Claims (lifo).\n-- @param queue: &str\n\
         SELECT id FROM backlog_job WHERE queue = $1\nORDER BY id DESC\n    LIMIT 1\n"
    );
    let skipped = text.replace("-- Claims", "-- @skip retention=keep tokens=one\n-- Claims");
    let v = try_expand("postgres", &skipped, &[("tail", "")]).unwrap();
    assert_eq!(v.len(), 6);
    assert!(!v.iter().any(|(n, _)| n.starts_with("claim_keep_one")));
    let sqlite = try_expand("sqlite", text, &[("tail", "")]).unwrap();
    assert!(sqlite[0].1.contains("queue = ?2"), "{}", sqlite[0].1);
    // A fragment with names bound by its `@include`, and text for some variants only.
    let cols = "-- @name c_{order}\n-- @axis order: fifo, lifo\nSELECT\n    -- @include cols p=j.\n\
                FROM t AS j\n";
    let c = try_expand(
        "postgres",
        cols,
        &[("cols", "{{p}}id, {{p}}kind{{? order=fifo : , {{p}}shard}}")],
    )
    .unwrap();
    assert_eq!(c[0].1, "SELECT\n    j.id, j.kind, j.shard\nFROM t AS j\n");
    assert_eq!(c[1].1, "SELECT\n    j.id, j.kind\nFROM t AS j\n");
    // MySQL binds by position: a `@bind` line when the order is not the declared one.
    let mysql = "-- @name m_{order}\n-- @axis order: fifo, lifo\n-- @param a: i64\n\
                 -- @param b: i64\n-- Doc.\n-- @if order=fifo\nSELECT ${b}, ${a}, ${b}\n\
                 -- @else\nSELECT ${a}, ${b}\n-- @end\n";
    let m = try_expand("mysql", mysql, &[]).unwrap();
    assert_eq!(
        m[0].1,
        "-- @param a: i64\n-- @param b: i64\n-- @bind b, a, b\n-- Doc.\nSELECT ?, ?, ?\n"
    );
    assert_eq!(
        m[1].1,
        "-- @param a: i64\n-- @param b: i64\n-- Doc.\nSELECT ?, ?\n"
    );
}

#[test]
fn a_bad_template_is_a_clear_error() {
    let head = "-- @name t_{order}\n-- @axis order: fifo, lifo\n";
    for (body, needle) in [
        ("-- @if order=fifo\nSELECT 1\n", "`@if` without `@end`"),
        ("SELECT 1\n-- @end\n", "`@end` without `@if`"),
        ("-- @else\n", "`@else` without `@if`"),
        ("-- @if shape=x\n-- @end\n", "no axis `shape`"),
        ("-- @if order\n-- @end\n", "AXIS=VALUE"),
        ("-- @if order=\n-- @end\n", "an empty value"),
        ("SELECT ${nope}\n", "no `-- @param nope`"),
        ("SELECT {{shape}}\n", "no such axis"),
        ("-- @include missing\n", "@include"),
        ("-- @iff order=fifo\n", "malformed"),
        ("SELECT 1{{? order=fifo : , 2\n", "without"),
        ("SELECT 1{{? order=fifo}}\n", "COND : TEXT"),
        ("-- @include x p\n", "KEY=VALUE"),
    ] {
        let err = try_expand("postgres", &format!("{head}{body}"), &[]).unwrap_err();
        assert!(err.contains(needle), "{body:?}: {err}");
    }
    for (text, needle) in [
        ("SELECT 1\n", "no `-- @name"),
        (
            "-- @name t_{order}\n-- @axis order: fifo\n",
            "two values or more",
        ),
        (
            "-- @name t\n-- @axis order: fifo, lifo\n",
            "does not name axis",
        ),
        (
            "-- @name t_{order}\n-- @axis order: fifo, lifo\n-- @axis order: a, b\n",
            "twice",
        ),
    ] {
        let err = try_expand("postgres", text, &[]).unwrap_err();
        assert!(err.contains(needle), "{text:?}: {err}");
    }
    for (body, needle) in [
        (
            "-- @param a: i64\n-- @param b: i64\nSELECT ${a}\n",
            "`-- @param b` is never bound",
        ),
        (
            "-- @param a: i64\n-- @list L b: i64\nSELECT ${a}, ${a} IN (/*L*/)\n",
            "write `?`",
        ),
    ] {
        let err = try_expand("mysql", &format!("{head}{body}"), &[]).unwrap_err();
        assert!(err.contains(needle), "{body:?}: {err}");
    }
    let loops = try_expand(
        "postgres",
        &format!("{head}-- @include a\n"),
        &[("a", "-- @include a\n")],
    )
    .unwrap_err();
    assert!(loops.contains("too deep"), "{loops}");
}

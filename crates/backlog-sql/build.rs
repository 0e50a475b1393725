//! Builds the SQL catalog: every `queries/<dialect>/*.sql` file becomes one typed Rust function
//! that binds the statement's parameters in the order its placeholders take them, and one entry
//! of the catalog that `tests/catalog.rs` renders for reviewers (`docs/catalog/<dialect>.md`).
//!
//! A statement file is the statement as it runs, with its parameters declared in comment lines:
//!
//! - `-- @param NAME: TYPE` declares a parameter (a Rust type, taken by value).
//! - `-- @list MARKER NAME: TYPE` declares a list: `/*MARKER*/` in the text stands for a list of
//!   `?` placeholders, one per value of `NAME: &[TYPE]`, padded to the next power of two by
//!   repeating the last value (an `IN` list is a set), so that a statement has a few texts.
//! - `-- @rows MARKER NAME: (TYPE, …)` declares rows: `/*MARKER*/` stands for `(?, …), (?, …)`,
//!   one group per element of `NAME: &[(TYPE, …)]`.
//! - `-- @table MARKER NAME` declares a table's number: `/*MARKER*/` in the text stands for the
//!   decimal digits of `NAME: u8`, written into the text (no placeholder), so that one file names
//!   any table of a ring (`backlog_job_done_/*SLOT*/`). An `@unprepared` statement may take one.
//! - `-- @bind NAME, NAME, …` (positional dialects only) gives the order of the placeholders
//!   when a parameter is bound more than once.
//! - `-- @external` marks a statement of the SQL contract that other clients run (the Python
//!   client in `clients/python`) and this library does not: generated all the same, and
//!   allowed to go unused.
//! - `-- @unprepared` marks a statement that must be sent as text (`sqlx::raw_sql`), such as DDL
//!   or VACUUM: only its text is generated, as a constant.
//!
//! Placeholders: PostgreSQL `$n` and SQLite `?n` are numbered, and the n-th declared parameter
//! is `$n`; MySQL's `?` are positional, bound in declaration order (or `@bind`'s), a list or rows
//! marker taking its place among them. The build fails when the declarations and the
//! placeholders disagree.

use std::fmt::Write as _;
use std::path::Path;

const DIALECTS: [(&str, &str); 3] = [
    ("postgres", "sqlx::Postgres"),
    ("mysql", "sqlx::MySql"),
    ("sqlite", "sqlx::Sqlite"),
];

#[derive(Debug)]
enum Kind {
    Scalar,
    List {
        marker: String,
    },
    Rows {
        marker: String,
        width: usize,
    },
    /// Written into the text, not bound.
    Table {
        marker: String,
    },
}

#[derive(Debug)]
struct Param {
    name: String,
    ty: String,
    kind: Kind,
}

#[derive(Debug)]
enum Slot {
    Numbered(usize),
    Positional,
    Marker(String),
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    println!("cargo:rerun-if-changed=queries");
    println!("cargo:rerun-if-changed=migrations");
    let mut errors = Vec::new();
    for (dialect, db) in DIALECTS {
        let dir = root.join("queries").join(dialect);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "sql"))
            .collect();
        files.sort();
        let mut code = String::new();
        let mut entries = String::new();
        for path in files {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let text = std::fs::read_to_string(&path).expect("read statement");
            match generate(dialect, db, &name, &path, &text) {
                Ok((f, e)) => {
                    code.push_str(&f);
                    entries.push_str(&e);
                }
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        writeln!(
            code,
            "/// Every statement of this dialect, for the rendered catalog.\n\
             pub(crate) const CATALOG: &[crate::catalog::Entry] = &[\n{entries}];"
        )
        .unwrap();
        match migrations(&root.join("migrations").join(dialect)) {
            Ok(m) => code.push_str(&m),
            Err(e) => errors.push(e),
        }
        std::fs::write(Path::new(&out).join(format!("catalog_{dialect}.rs")), code)
            .expect("write catalog");
    }
    if !errors.is_empty() {
        panic!("SQL catalog:\n{}", errors.join("\n"));
    }
}

/// `MIGRATIONS`: the files `NNNN_name.sql` of a dialect's migrations folder, in order, numbered
/// 1, 2, 3… without a gap (each dialect has the same numbers; `lib.rs` tests that).
fn migrations(dir: &Path) -> Result<String, String> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The migrations of this dialect, from `migrations/<dialect>/NNNN_name.sql`.\n\
         pub(crate) const MIGRATIONS: &[crate::sqltext::Migration] = &[\n",
    );
    for (i, path) in files.iter().enumerate() {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let (number, name) = stem
            .split_once('_')
            .ok_or_else(|| format!("{}: not named NNNN_name.sql", path.display()))?;
        let version: i64 = number
            .parse()
            .map_err(|_| format!("{}: not named NNNN_name.sql", path.display()))?;
        if version != i as i64 + 1 {
            return Err(format!("{}: expected migration {}", path.display(), i + 1));
        }
        writeln!(
            out,
            "    crate::sqltext::Migration {{ version: {version}, name: {name:?}, \
             sql: include_str!({:?}) }},",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    Ok(out)
}

/// The function and the catalog entry of one statement.
fn generate(
    dialect: &str,
    db: &str,
    name: &str,
    path: &Path,
    text: &str,
) -> Result<(String, String), String> {
    let mut params: Vec<Param> = Vec::new();
    let mut bind: Option<Vec<String>> = None;
    let mut unprepared = false;
    let mut external = false;
    let mut doc = Vec::new();
    for line in text.lines() {
        let Some(c) = line.trim_start().strip_prefix("--") else {
            continue;
        };
        let c = c.trim();
        if let Some(rest) = c.strip_prefix("@param ") {
            let (n, t) = name_type(rest)?;
            params.push(Param {
                name: n,
                ty: t,
                kind: Kind::Scalar,
            });
        } else if let Some(rest) = c.strip_prefix("@list ") {
            let (marker, rest) = rest.split_once(' ').ok_or("@list MARKER NAME: TYPE")?;
            let (n, t) = name_type(rest)?;
            params.push(Param {
                name: n,
                ty: t,
                kind: Kind::List {
                    marker: marker.to_owned(),
                },
            });
        } else if let Some(rest) = c.strip_prefix("@rows ") {
            let (marker, rest) = rest.split_once(' ').ok_or("@rows MARKER NAME: (TYPE, …)")?;
            let (n, t) = name_type(rest)?;
            let inner = t
                .strip_prefix('(')
                .and_then(|t| t.strip_suffix(')'))
                .ok_or("@rows takes a tuple type")?;
            let width = split_top(inner).len();
            params.push(Param {
                name: n,
                ty: t,
                kind: Kind::Rows {
                    marker: marker.to_owned(),
                    width,
                },
            });
        } else if let Some(rest) = c.strip_prefix("@table ") {
            let (marker, n) = rest.split_once(' ').ok_or("@table MARKER NAME")?;
            params.push(Param {
                name: n.trim().to_owned(),
                ty: "u8".to_owned(),
                kind: Kind::Table {
                    marker: marker.to_owned(),
                },
            });
        } else if c == "@unprepared" {
            unprepared = true;
        } else if c.starts_with("@generated ") {
            // A variant written from a template (tests/templates.rs): not documentation.
        } else if c == "@external" {
            external = true;
        } else if let Some(rest) = c.strip_prefix("@bind ") {
            bind = Some(rest.split(',').map(|s| s.trim().to_owned()).collect());
        } else if c.starts_with('@') {
            return Err(format!("unknown declaration `{c}`"));
        } else {
            doc.push(c.to_owned());
        }
    }
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            return Err(format!("`{}` is declared twice", p.name));
        }
    }
    let markers: Vec<&str> = params
        .iter()
        .filter_map(|p| match &p.kind {
            Kind::List { marker } | Kind::Rows { marker, .. } | Kind::Table { marker } => {
                Some(marker.as_str())
            }
            Kind::Scalar => None,
        })
        .collect();
    let mut slots = scan(dialect, text, &markers)?;
    for t in &params {
        let Kind::Table { marker } = &t.kind else {
            continue;
        };
        if !slots
            .iter()
            .any(|s| matches!(s, Slot::Marker(m) if m == marker))
        {
            return Err(format!("/*{marker}*/ of `{}` is not in the text", t.name));
        }
        slots.retain(|s| !matches!(s, Slot::Marker(m) if m == marker));
    }
    // What is bound: every parameter but the tables, written into the text.
    let (tables, params): (Vec<Param>, Vec<Param>) = params
        .into_iter()
        .partition(|p| matches!(p.kind, Kind::Table { .. }));
    // The order the values go in: one parameter name per slot.
    let order: Vec<String> = if slots.iter().any(|s| matches!(s, Slot::Numbered(_))) {
        if bind.is_some() {
            return Err("@bind is for positional placeholders".into());
        }
        let mut used: Vec<usize> = slots
            .iter()
            .map(|s| match s {
                Slot::Numbered(n) => Ok(*n),
                _ => Err("numbered and other placeholders mixed".to_owned()),
            })
            .collect::<Result<_, _>>()?;
        used.sort_unstable();
        used.dedup();
        let want: Vec<usize> = (1..=params.len()).collect();
        if used != want {
            return Err(format!(
                "placeholders {used:?} but {} parameters declared",
                params.len()
            ));
        }
        if params.iter().any(|p| !matches!(p.kind, Kind::Scalar)) {
            return Err("lists and rows are for positional placeholders".into());
        }
        params.iter().map(|p| p.name.clone()).collect()
    } else {
        let names = match bind {
            Some(b) => b,
            None => params.iter().map(|p| p.name.clone()).collect(),
        };
        if names.len() != slots.len() {
            return Err(format!(
                "{} placeholders but {} bound",
                slots.len(),
                names.len()
            ));
        }
        for (slot, n) in slots.iter().zip(&names) {
            let p = params
                .iter()
                .find(|p| &p.name == n)
                .ok_or_else(|| format!("`{n}` is bound but not declared"))?;
            let ok = match (slot, &p.kind) {
                (Slot::Positional, Kind::Scalar) => true,
                (Slot::Marker(m), Kind::List { marker } | Kind::Rows { marker, .. }) => m == marker,
                _ => false,
            };
            if !ok {
                return Err(format!("`{n}` does not match its placeholder {slot:?}"));
            }
        }
        for p in &params {
            if !names.contains(&p.name) {
                return Err(format!("`{}` is declared but never bound", p.name));
            }
        }
        names
    };

    let file = path.display().to_string();
    let mut f = String::new();
    for d in &doc {
        writeln!(f, "/// {d}").unwrap();
    }
    if doc.is_empty() {
        writeln!(f, "/// `{dialect}/{name}.sql`.").unwrap();
    }
    let args: Vec<String> = (tables.iter().chain(&params))
        .map(|p| match &p.kind {
            Kind::Scalar | Kind::Table { .. } => format!("{}: {}", p.name, p.ty),
            Kind::List { .. } => format!("{}: &[{}]", p.name, p.ty),
            Kind::Rows { .. } => format!("{}: &[{}]", p.name, p.ty),
        })
        .collect();
    // Each table's number written into `text`.
    let write_tables: String = tables
        .iter()
        .map(|t| match &t.kind {
            Kind::Table { marker } => format!(
                "    let text = text.replace(\"/*{marker}*/\", &{}.to_string());\n",
                t.name
            ),
            _ => unreachable!(),
        })
        .collect();
    let upper = name.to_uppercase();
    if unprepared && !tables.is_empty() {
        if !params.is_empty() || tables.len() > 1 {
            return Err("an @unprepared statement takes one @table and no parameters".into());
        }
        let Kind::Table { marker } = &tables[0].kind else {
            unreachable!()
        };
        writeln!(
            f,
            "/// Sent unprepared (`sqlx::raw_sql`).\n\
             pub(crate) fn {name}({}) -> String {{\n    \
             include_str!({file:?}).replace(\"/*{marker}*/\", &{}.to_string())\n}}\n",
            args.join(", "),
            tables[0].name
        )
        .unwrap();
        return Ok((f, catalog_entry(name, &file, &tables, &order)));
    }
    if unprepared {
        if !params.is_empty() {
            return Err("an @unprepared statement takes no parameters".into());
        }
        writeln!(
            f,
            "/// Sent unprepared (`sqlx::raw_sql`).\n\
             pub(crate) const {upper}: &str = include_str!({file:?});\n"
        )
        .unwrap();
        return Ok((f, catalog_entry(name, &file, &params, &order)));
    }
    let unused = if external { "    dead_code,\n" } else { "" };
    writeln!(
        f,
        "#[allow(\n{unused}    clippy::too_many_arguments,\n    clippy::type_complexity,\n    clippy::needless_borrows_for_generic_args\n)]\n\
         pub(crate) fn {name}({}) -> crate::catalog::Stmt<{db}> {{",
        args.join(", ")
    )
    .unwrap();
    writeln!(f, "    const TEXT: &str = {upper};").unwrap();
    let dynamic = !tables.is_empty() || params.iter().any(|p| !matches!(p.kind, Kind::Scalar));
    writeln!(
        f,
        "    #[allow(unused_mut)]
    let mut a = crate::catalog::Args::<{db}>::default();"
    )
    .unwrap();
    if dynamic {
        let lists = params.iter().any(|p| !matches!(p.kind, Kind::Scalar));
        let mutable = if lists {
            "    let mut text = text;\n"
        } else {
            ""
        };
        write!(
            f,
            "    let text = TEXT.to_owned();\n{write_tables}{mutable}"
        )
        .unwrap();
    }
    for n in &order {
        let p = params.iter().find(|p| &p.name == n).unwrap();
        match &p.kind {
            Kind::Scalar => writeln!(f, "    a.add(&{n});").unwrap(),
            Kind::List { marker } => writeln!(
                f,
                "    text = crate::catalog::expand_list(&text, \"/*{marker}*/\", {n}.len());\n    \
                 a.list({n});"
            )
            .unwrap(),
            Kind::Table { .. } => unreachable!("written into the text"),
            Kind::Rows { marker, width } => {
                writeln!(
                    f,
                    "    text = crate::catalog::expand_rows(&text, \"/*{marker}*/\", {n}.len(), \
                     {width});\n    for r in {n} {{"
                )
                .unwrap();
                for i in 0..*width {
                    writeln!(f, "        a.add(&r.{i});").unwrap();
                }
                writeln!(f, "    }}").unwrap();
            }
        }
    }
    if dynamic {
        writeln!(f, "    a.finish_owned(text)\n}}\n").unwrap();
    } else {
        writeln!(f, "    a.finish(TEXT)\n}}\n").unwrap();
    }
    writeln!(
        f,
        "/// The text of [`{name}`], for a statement that must go unprepared.\n\
         {}pub(crate) const {upper}: &str = include_str!({file:?});\n",
        if external {
            "#[allow(dead_code)]\n"
        } else {
            ""
        }
    )
    .unwrap();

    let mut declared = tables;
    declared.extend(params);
    Ok((f, catalog_entry(name, &file, &declared, &order)))
}

/// The catalog entry of a statement.
fn catalog_entry(name: &str, file: &str, params: &[Param], order: &[String]) -> String {
    let decl: Vec<String> = params
        .iter()
        .map(|p| {
            let kind = match &p.kind {
                Kind::Scalar => "param".to_owned(),
                Kind::List { marker } => format!("list /*{marker}*/"),
                Kind::Rows { marker, .. } => format!("rows /*{marker}*/"),
                Kind::Table { marker } => format!("table /*{marker}*/"),
            };
            format!("({:?}, {:?}, {:?})", p.name, p.ty, kind)
        })
        .collect();
    format!(
        "    crate::catalog::Entry {{ name: {name:?}, params: &[{}], binds: &[{}], text: \
         include_str!({file:?}) }},\n",
        decl.join(", "),
        order
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `NAME: TYPE`.
fn name_type(s: &str) -> Result<(String, String), String> {
    let (n, t) = s.split_once(':').ok_or("NAME: TYPE")?;
    let n = n.trim();
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("bad parameter name `{n}`"));
    }
    Ok((n.to_owned(), t.trim().to_owned()))
}

/// Splits at commas outside brackets.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The placeholders of a statement in text order, outside comments and quoted text.
fn scan(dialect: &str, text: &str, markers: &[&str]) -> Result<Vec<Slot>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map(|e| i + 2 + e)
                    .ok_or("unclosed comment")?;
                let inner = &text[i + 2..end];
                if markers.contains(&inner) {
                    out.push(Slot::Marker(inner.to_owned()));
                } else if inner.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    return Err(format!("/*{inner}*/ is not a declared list or rows marker"));
                }
                i = end + 2;
            }
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                i += 1;
            }
            b'$' if dialect == "postgres" => {
                let n = digits(b, i + 1);
                if n > 0 {
                    out.push(Slot::Numbered(text[i + 1..i + 1 + n].parse().unwrap()));
                }
                i += 1 + n;
            }
            b'?' if dialect != "postgres" => {
                let n = digits(b, i + 1);
                if n > 0 && dialect == "sqlite" {
                    out.push(Slot::Numbered(text[i + 1..i + 1 + n].parse().unwrap()));
                } else if n > 0 {
                    return Err("MySQL takes plain `?`".into());
                } else {
                    out.push(Slot::Positional);
                }
                i += 1 + n;
            }
            _ => i += 1,
        }
    }
    Ok(out)
}

fn digits(b: &[u8], from: usize) -> usize {
    b[from.min(b.len())..]
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .count()
}

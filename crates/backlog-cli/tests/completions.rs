//! Shell completions and the man page, made from the command's own definitions (issue 46).

mod common;

use std::process::Command;

fn backlog(args: &[&str]) -> std::process::Output {
    Command::new(common::BIN)
        .args(args)
        .env_remove("BACKLOG_DATABASE_URL")
        .output()
        .unwrap()
}

/// The script of `shell`, which must have worked.
fn script(shell: &str) -> String {
    let out = backlog(&["completions", shell]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_load_in_bash_and_name_every_command() {
    let bash = script("bash");
    for command in ["enqueue", "work", "stats", "serve", "completions", "man"] {
        assert!(bash.contains(command), "bash completion lacks {command}");
    }
    // Bash loads it and registers the function for `backlog`, and it completes a subcommand.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("backlog.bash");
    std::fs::write(&file, &bash).unwrap();
    let probe = format!(
        "source {}; complete -p backlog; COMP_WORDS=(backlog enq); COMP_CWORD=1; \
         COMP_LINE='backlog enq'; COMP_POINT=11; _backlog backlog enq backlog; \
         echo \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("-F _backlog backlog"), "{text}");
    assert!(text.lines().last().unwrap().contains("enqueue"), "{text}");

    assert!(script("zsh").starts_with("#compdef backlog"));
    assert!(script("fish").contains("complete -c backlog"));
}

#[test]
fn an_unknown_shell_is_refused_with_the_known_ones() {
    let out = backlog(&["completions", "tcsh"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bash") && err.contains("zsh") && err.contains("fish"),
        "{err}"
    );
}

#[test]
fn the_man_page_is_roff_with_every_command() {
    let out = backlog(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH backlog 1"), "{page}");
    for command in ["migrate", "enqueue", "work", "serve", "audit"] {
        assert!(page.contains(command), "the man page lacks {command}");
    }
    // man itself renders it, when it is installed.
    if let Ok(out) = Command::new("man")
        .args(["-l", "-"])
        .env("MANWIDTH", "100")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(page.as_bytes())?;
            child.wait_with_output()
        })
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("SYNOPSIS"), "{text}");
    }
}

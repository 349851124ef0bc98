//! What `check` says about hostile or careless input: literal secrets anywhere in a server's
//! configuration, control characters in the file, and YAML errors in our own words.

use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Code, SourceFile, compile};

fn graph_with_servers(servers: &str) -> String {
    format!(
        "version: \"1\"\nserver: {{ name: s, version: \"1\" }}\nmcpServers:\n{servers}tools: []\n"
    )
}

/// The messages of the W0102 warnings `check` gives for these servers.
fn secret_warnings(servers: &str) -> Vec<String> {
    let file = SourceFile::new("g.yaml", graph_with_servers(servers));
    compile(&file, None)
        .diagnostics
        .into_iter()
        .filter(|d| d.code == Code::W0102)
        .map(|d| d.message)
        .collect()
}

#[test]
fn literal_secrets_are_found_in_headers_urls_env_and_args() {
    let cases = [
        (
            "  h:\n    type: http\n    url: \"https://x.test/mcp\"\n    headers: { Proxy-Authorization: \"Basic abc\" }\n",
            "header `Proxy-Authorization`",
        ),
        (
            "  h:\n    type: http\n    url: \"https://x.test/mcp\"\n    headers: { Cookie: \"session=abc\" }\n",
            "header `Cookie`",
        ),
        (
            "  h:\n    type: http\n    url: \"https://x.test/mcp\"\n    headers: { Set-Cookie: \"id=abc\" }\n",
            "header `Set-Cookie`",
        ),
        (
            "  h:\n    type: http\n    url: \"https://x.test/mcp?api_key=abc123\"\n",
            "query parameter `api_key`",
        ),
        (
            "  h:\n    type: http\n    url: \"https://me:hunter2@x.test/mcp\"\n",
            "the password of its credentials",
        ),
        (
            "  c:\n    command: node\n    env: { GITHUB_TOKEN: \"ghp_abc\" }\n",
            "environment variable `GITHUB_TOKEN`",
        ),
        (
            "  c:\n    command: node\n    args: [\"server.js\", \"--api-key=abc\"]\n",
            "argument `--api-key`",
        ),
        (
            "  c:\n    command: node\n    args: [\"server.js\", \"--token\", \"abc\"]\n",
            "argument `--token`",
        ),
        (
            "  c:\n    command: node\n    args: [\"server.js\", \"https://x.test/?access_token=abc\"]\n",
            "query parameter `access_token`",
        ),
    ];
    for (servers, expected) in cases {
        let found = secret_warnings(servers);
        assert!(
            found.len() == 1 && found[0].contains(expected),
            "expected one W0102 about {expected} for\n{servers}\ngot {found:?}"
        );
    }
}

#[test]
fn values_from_the_environment_and_ordinary_settings_are_not_secrets() {
    let servers = concat!(
        "  h:\n    type: http\n    url: \"https://${USER}:${PASS}@x.test/mcp?api_key=${KEY}&page=2\"\n",
        "    headers: { Authorization: \"Bearer ${TOKEN}\", Accept: \"application/json\" }\n",
        "  c:\n    command: node\n    args: [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"--token\", \"${TOKEN}\", \"--key-file=/etc/key.pem\"]\n",
        "    env: { GITHUB_TOKEN: \"${GITHUB_TOKEN}\", AUTHOR: \"Ada\", LOG_LEVEL: debug, KEY_PATH: ./keys/id.pem }\n",
    );
    assert_eq!(secret_warnings(servers), Vec::<String>::new());
}

#[test]
fn control_characters_never_reach_the_terminal_raw() {
    // A key written with YAML escapes holds a NUL and an escape character; the unknown-key
    // warning quotes it. A raw NUL elsewhere in the file shows in the snippet of the error it
    // causes.
    for text in [
        "version: \"1\"\nserver: { name: s, version: \"1\" }\ntools: []\n\"bad\\0key\\e[2J\": 1\n",
        "version: \"1\"\nserver: { name: s, version: \"1\" }\ntools: [\u{0}]\n",
    ] {
        let file = SourceFile::new("g.yaml", text);
        let checked = compile(&file, None);
        assert!(!checked.diagnostics.is_empty(), "{text:?}");
        for shown in [
            render::human_all(&checked, &file, Style::PLAIN),
            render::plain_list(&checked, &file),
        ] {
            assert!(
                !shown.contains('\u{0}') && !shown.contains('\u{1b}'),
                "raw control characters in:\n{shown:?}"
            );
        }
    }
    let file = SourceFile::new(
        "g.yaml",
        "version: \"1\"\nserver: { name: s, version: \"1\" }\ntools: []\n\"bad\\0key\": 1\n",
    );
    let shown = render::plain_list(&compile(&file, None), &file);
    assert!(
        shown.contains("bad\\u{0}key"),
        "the NUL is not shown escaped: {shown}"
    );
}

#[test]
fn yaml_errors_speak_of_the_file_not_the_library() {
    let file = SourceFile::new(
        "g.yaml",
        "version: \"1\"\nserver: { name: s, version: \"1\" }\n---\nversion: \"2\"\n",
    );
    let checked = compile(&file, None);
    let messages: Vec<&str> = checked
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("more than one YAML document")),
        "{messages:?}"
    );
    assert!(
        messages.iter().all(|m| !m.contains("from_str")),
        "{messages:?}"
    );
}

/// What is not a regular file is refused before it is opened, and a file is read to a bound: a
/// FIFO would block `check`, the toolkit and `serve --watch` until a writer came, `/dev/zero`
/// would be read until memory ran out. Each read is bounded in time here, so a regression fails
/// rather than hangs.
#[test]
fn what_is_not_a_regular_file_or_is_too_large_is_refused_at_once() {
    use std::time::Duration;
    let dir = std::env::temp_dir().join(format!("mcpgraph-not-a-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("graph.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
    let large = dir.join("large.yaml");
    let file = std::fs::File::create(&large).unwrap();
    file.set_len(mcpgraph_compiler::diagnostics::MAX_SOURCE_BYTES + 1)
        .unwrap();
    let read = |path: std::path::PathBuf| {
        let (sent, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(
                SourceFile::read(&path)
                    .map(|_| ())
                    .map_err(|d| (d.code, d.message)),
            );
        });
        answer
            .recv_timeout(Duration::from_secs(5))
            .expect("the read returns within 5 s")
    };
    for path in [fifo.clone(), "/dev/zero".into(), dir.clone()] {
        let (code, message) = read(path.clone()).expect_err("refused");
        assert_eq!(code, Code::E0003);
        assert!(
            message.contains("not a regular file"),
            "{}: {message}",
            path.display()
        );
    }
    let (code, message) = read(large).expect_err("refused");
    assert_eq!(code, Code::E0003);
    assert!(
        message.contains("more than the 67108864 a file may take"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

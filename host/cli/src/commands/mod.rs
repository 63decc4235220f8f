//! One module a command. Each is a leaf: it uses the shared layers
//! ([`crate::context`], [`crate::output`], [`crate::runtime`],
//! [`crate::terminal`], [`crate::exit`], [`crate::input`]) and never
//! another command, so a command can change without touching the others
//! (checked by `commands_are_leaves` below).

pub(crate) mod approvals;
pub(crate) mod ask;
pub(crate) mod chat;
pub(crate) mod demo;
pub(crate) mod eval;
#[cfg(feature = "containers")]
pub(crate) mod image;
pub(crate) mod keys;
pub(crate) mod mcp;
pub(crate) mod op;
pub(crate) mod release;
pub(crate) mod run;
pub(crate) mod schedules;
pub(crate) mod serve;
pub(crate) mod session;
pub(crate) mod store;
pub(crate) mod worker;
pub(crate) mod workflow;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The sources of the commands, by module name.
    fn commands() -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
        let mut found = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(at) = stack.pop() {
            for entry in std::fs::read_dir(&at).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path.file_name().is_some_and(|n| n != "mod.rs")
                {
                    let relative = path.strip_prefix(&dir).unwrap();
                    let command = relative
                        .components()
                        .next()
                        .unwrap()
                        .as_os_str()
                        .to_string_lossy()
                        .trim_end_matches(".rs")
                        .to_owned();
                    found.push((command, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        found
    }

    #[test]
    fn commands_are_leaves() {
        let commands = commands();
        assert!(commands.len() >= 17, "{} commands found", commands.len());
        let names: Vec<&str> = commands.iter().map(|(name, _)| name.as_str()).collect();
        for (command, source) in &commands {
            for other in &names {
                if other == command {
                    continue;
                }
                for reference in [
                    format!("crate::commands::{other}"),
                    format!("commands::{other}::"),
                    format!("super::{other}"),
                ] {
                    assert!(
                        !source.contains(&reference),
                        "the command `{command}` uses `{reference}`: move what they share to a \
                         shared layer (context, output, runtime)"
                    );
                }
            }
            assert!(
                !source.contains("super::super"),
                "`{command}` reaches above its own module"
            );
        }
    }
}

//! `hane keys create | list | remove`: the API keys `hane serve` accepts.
//! Only a key's hash is stored, so `create` is the one time it is shown.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::builder::{PossibleValuesParser, TypedValueParser as _};
use clap::{Args, Subcommand};
use hane_server::{KeyError, KeyRole};
use serde_json::json;

use crate::context::StoreArg;
use crate::exit;
use crate::output::time;
use crate::terminal::{terminal_json, terminal_text};

#[derive(Args)]
pub struct KeysArgs {
    #[command(flatten)]
    store: StoreArg,
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key and print it on stdout. It is shown only now: only its
    /// hash is stored.
    Create {
        /// The key's name: 1 to 64 ASCII letters, digits, `_`, `.` or `-`.
        name: String,
        /// What it may do: a viewer reads runs, tools, actions and the
        /// budget; an approver also approves, rejects and reconciles
        /// outbound actions (of its groups, with --group); an operator
        /// also starts and cancels runs and sets decider overrides.
        #[arg(
            long,
            value_name = "ROLE",
            value_parser = PossibleValuesParser::new(KeyRole::ALL.map(KeyRole::as_str))
                .try_map(|s| s.parse::<KeyRole>())
        )]
        role: KeyRole,
        /// An assignment group whose outbound actions the key decides
        /// (approves, rejects, reconciles); repeat for more. Without it an
        /// approver or operator key decides the actions of every group.
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// Print JSON: name, role, groups and key.
        #[arg(long)]
        json: bool,
    },
    /// List keys by name with their roles and groups; never the keys
    /// themselves.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a key: requests with it are refused from now on.
    Remove {
        /// The key's name.
        name: String,
    },
}

pub(crate) fn main(args: KeysArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", terminal_text(&format!("{e:#}")));
            let usage = e.downcast_ref::<KeyError>().is_some_and(|e| {
                matches!(
                    e,
                    KeyError::InvalidName(_)
                        | KeyError::Duplicate(_)
                        | KeyError::InvalidGroup(_)
                        | KeyError::NoGroups
                        | KeyError::GroupsForViewer
                )
            });
            ExitCode::from(if usage { exit::USAGE } else { exit::FAILURE })
        }
    }
}

fn run(args: KeysArgs) -> anyhow::Result<ExitCode> {
    let path = args.store.path()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        // Keys live in the registry alone: no sandbox is started.
        let registry = crate::runtime::open_registry(&path)?;
        match args.command {
            KeysCommand::Create {
                name,
                role,
                groups,
                json,
            } => {
                let given = (!groups.is_empty()).then_some(groups);
                let groups = hane_server::key_groups(role, given.as_deref())?;
                let key = hane_server::create_key(&registry, &name, role, groups.as_deref()).await?;
                if json {
                    let doc = json!({"name": name, "role": role.as_str(), "groups": groups, "key": key});
                    println!("{}", terminal_json(&doc)?);
                } else {
                    let deciding = match (&groups, role) {
                        (_, KeyRole::Viewer) => String::new(),
                        (None, _) => ", deciding the actions of every group".to_owned(),
                        (Some(groups), _) => {
                            format!(", deciding the actions of {}", groups.join(", "))
                        }
                    };
                    eprintln!(
                        "created key `{name}` with the {role} role{deciding}; it is shown only now, keep it somewhere safe:"
                    );
                    println!("{key}");
                }
            }
            KeysCommand::List { json } => {
                let keys = registry.api_keys().list().await?;
                if json {
                    let list: Vec<_> = keys
                        .iter()
                        .map(|k| json!({"name": k.name, "role": k.role, "groups": k.groups, "createdAtMs": k.created_at_ms}))
                        .collect();
                    println!("{}", terminal_json(&list)?);
                } else if keys.is_empty() {
                    eprintln!("no API keys: create one with `hane keys create NAME --role operator`");
                } else {
                    let width = keys.iter().map(|k| k.name.len()).max().unwrap_or(0).max(4);
                    println!("{:width$}  {:8}  {:20}  GROUPS", "NAME", "ROLE", "CREATED");
                    for key in &keys {
                        let created = time(key.created_at_ms);
                        let groups = match (&key.groups, key.role.as_str()) {
                            (_, "viewer") => "-".to_owned(),
                            (None, _) => "(every group)".to_owned(),
                            (Some(groups), _) => groups.join(", "),
                        };
                        println!(
                            "{:width$}  {:8}  {:20}  {groups}",
                            key.name,
                            key.role,
                            created
                        );
                    }
                }
            }
            KeysCommand::Remove { name } => {
                if !registry.api_keys().remove(&name).await? {
                    eprintln!("error: no key is named `{name}`: `hane keys list` lists them");
                    return Ok(ExitCode::from(exit::USAGE));
                }
                eprintln!("removed key `{name}`: requests with it are refused from now on");
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

//! `test.echo` as a native program, the baseline a sandboxed call is
//! compared with: reads `{"message": …}` on stdin and writes
//! `{"message": …, "length": …}` (the length in bytes) on stdout.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Input {
    message: String,
}

#[derive(Serialize)]
struct Output {
    message: String,
    length: u32,
}

fn main() -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("error: cannot read stdin: {e}");
        return ExitCode::FAILURE;
    }
    let input: Input = match serde_json::from_str(&text) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("error: invalid input: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(length) = u32::try_from(input.message.len()) else {
        eprintln!("error: message is too long");
        return ExitCode::from(2);
    };
    let output = Output {
        message: input.message,
        length,
    };
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &output)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.flush());
    if let Err(e) = written {
        eprintln!("error: cannot write stdout: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

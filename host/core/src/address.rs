//! Where an outbound action goes, checked when it is proposed: an email
//! address, a phone number, a connection's name and the path of an API
//! call.
//!
//! The sandbox's `actions` capability checks an operation's proposal with
//! [`check_recipient`] as it is made, and the coordinator checks every
//! proposal with it (and [`check_api_path`]) before a decider, a policy
//! rule or the day's budget sees it, so what is approved, matched against
//! a rule such as `*@fleet.example`, counted and shown to a person is
//! exactly what would be delivered. A recipient is refused rather than
//! cleaned: `boss\u{1b}[4D@fleet.example` is not `boss@fleet.example`.
//!
//! # Examples
//!
//! ```
//! use hane_core::address::{check_email_address, check_phone_number};
//!
//! assert!(check_email_address("depot@fleet.example").is_ok());
//! let e = check_email_address("boss\u{1b}[4D@fleet.example").unwrap_err();
//! assert_eq!(
//!     e.to_string(),
//!     "is not one email address (`name@example.com`): it holds the control character \\u{1b}"
//! );
//! assert!(check_phone_number("+819012345678").is_ok());
//! assert!(check_phone_number("090-1234-5678").is_err());
//! ```

use std::fmt;

use crate::ControlTool;

/// Longest local part of an email address (before `@`), in bytes (RFC 5321).
pub const MAX_LOCAL_PART_BYTES: usize = 64;
/// Longest domain of an email address, in bytes (RFC 5321).
pub const MAX_DOMAIN_BYTES: usize = 255;
/// Longest label of a domain, in bytes (RFC 1035).
pub const MAX_LABEL_BYTES: usize = 63;
/// Fewest digits of an E.164 phone number, country code included.
pub const MIN_PHONE_DIGITS: usize = 8;
/// Most digits of an E.164 phone number, country code included.
pub const MAX_PHONE_DIGITS: usize = 15;
/// Longest path (with its query) of an `integration.execute` call, in bytes.
pub const MAX_API_PATH_BYTES: usize = 2000;

/// Why a recipient or path is refused. Its text follows the name of what
/// was checked: "`to` " + "is not one email address …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("is not {}: {problem}", .expected.describe())]
pub struct AddressError {
    /// What was expected.
    pub expected: AddressKind,
    /// What is wrong.
    pub problem: AddressProblem,
}

/// What an [`AddressError`] expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressKind {
    /// One email address, without a display name.
    EmailAddress,
    /// A phone number in E.164 form.
    PhoneNumber,
    /// The name of one of the agent's connections.
    ConnectionName,
    /// The path of an API call under a connection's base URL.
    ApiPath,
}

impl AddressKind {
    fn describe(self) -> &'static str {
        match self {
            AddressKind::EmailAddress => "one email address (`name@example.com`)",
            AddressKind::PhoneNumber => {
                "a phone number in E.164 form (`+`, then 8 to 15 digits, the first not 0)"
            }
            AddressKind::ConnectionName => "a connection's name",
            AddressKind::ApiPath => "a path such as `/v1/orders?id=7`",
        }
    }
}

/// What is wrong with a recipient or path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressProblem {
    /// Nothing at all.
    #[error("it is empty")]
    Empty,
    /// A character it may not hold: a control character, a space, a
    /// comma, an angle bracket, a quote, or anything not ASCII.
    #[error("it holds {}", Shown(*.0))]
    Character(char),
    /// Not exactly one `@`.
    #[error("it has {0} `@`, not one")]
    AtSigns(usize),
    /// A part longer than its cap.
    #[error("its {part} is {bytes} bytes; at most {max}")]
    TooLong {
        /// `local part`, `domain`, `domain label`, …
        part: &'static str,
        /// Its length.
        bytes: usize,
        /// The cap.
        max: usize,
    },
    /// A part that is malformed otherwise.
    #[error("its {part} {problem}")]
    Malformed {
        /// `local part`, `domain`, …
        part: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A number without its `+`, of too few or too many digits, or
    /// starting with 0.
    #[error("{0}")]
    Number(&'static str),
}

/// A character in words, escaped so that it cannot act on a terminal.
struct Shown(char);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.0;
        match c {
            ' ' => f.write_str("a space"),
            ',' => f.write_str("a comma"),
            '<' | '>' => write!(f, "an angle bracket `{c}`"),
            '"' => f.write_str("a quote `\"`"),
            _ if c.is_control() => write!(f, "the control character {}", c.escape_unicode()),
            _ if !c.is_ascii() => write!(f, "{}, which is not ASCII", c.escape_unicode()),
            _ => write!(f, "`{c}`"),
        }
    }
}

fn fail(expected: AddressKind, problem: AddressProblem) -> AddressError {
    AddressError { expected, problem }
}

/// What the local part of an address may hold besides letters and digits
/// (RFC 5322's `atext`, and the dots between its words). No quoted local
/// parts, comments or display names.
fn local_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c)
}

fn domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

/// Checks that `address` is exactly one mailbox address, as SMTP's
/// `RCPT TO` takes it: an ASCII local part of `atext` words joined by
/// dots, one `@`, and a domain of at least two labels of letters, digits
/// and inner hyphens (an internationalized domain in its `xn--` form),
/// within RFC 5321's lengths. No display name, list, comment, quoting,
/// space or control character.
///
/// # Errors
///
/// The first thing wrong, without the address itself.
pub fn check_email_address(address: &str) -> Result<(), AddressError> {
    let fail = |problem| fail(AddressKind::EmailAddress, problem);
    if address.is_empty() {
        return Err(fail(AddressProblem::Empty));
    }
    if let Some(c) = address
        .chars()
        .find(|&c| !(local_char(c) || domain_char(c) || c == '@'))
    {
        return Err(fail(AddressProblem::Character(c)));
    }
    let ats = address.matches('@').count();
    if ats != 1 {
        return Err(fail(AddressProblem::AtSigns(ats)));
    }
    let (local, domain) = address.split_once('@').unwrap_or_default();
    if local.is_empty() {
        return Err(fail(AddressProblem::Malformed {
            part: "local part",
            problem: "(before `@`) is empty",
        }));
    }
    if local.len() > MAX_LOCAL_PART_BYTES {
        return Err(fail(AddressProblem::TooLong {
            part: "local part",
            bytes: local.len(),
            max: MAX_LOCAL_PART_BYTES,
        }));
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Err(fail(AddressProblem::Malformed {
            part: "local part",
            problem: "starts or ends with a dot, or has two in a row",
        }));
    }
    check_domain(domain).map_err(fail)
}

fn check_domain(domain: &str) -> Result<(), AddressProblem> {
    if let Some(c) = domain.chars().find(|&c| !domain_char(c)) {
        return Err(AddressProblem::Character(c));
    }
    let malformed = |problem| AddressProblem::Malformed {
        part: "domain",
        problem,
    };
    if domain.is_empty() {
        return Err(malformed("(after `@`) is empty"));
    }
    if domain.len() > MAX_DOMAIN_BYTES {
        return Err(AddressProblem::TooLong {
            part: "domain",
            bytes: domain.len(),
            max: MAX_DOMAIN_BYTES,
        });
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 {
        return Err(malformed(
            "has one label; a domain has at least two, such as `example.com`",
        ));
    }
    for label in &labels {
        if label.is_empty() {
            return Err(malformed("starts or ends with a dot, or has two in a row"));
        }
        if label.len() > MAX_LABEL_BYTES {
            return Err(AddressProblem::TooLong {
                part: "domain label",
                bytes: label.len(),
                max: MAX_LABEL_BYTES,
            });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(malformed("has a label that starts or ends with `-`"));
        }
    }
    if labels
        .last()
        .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(malformed("ends in a number; an IP address is not a domain"));
    }
    Ok(())
}

/// Checks that `number` is a phone number in E.164 form: `+`, then 8 to
/// 15 ASCII digits, the first not 0. No spaces, dashes or parentheses: a
/// provider is given it as it is.
///
/// # Errors
///
/// What is wrong, without the number itself.
pub fn check_phone_number(number: &str) -> Result<(), AddressError> {
    let fail = |problem| fail(AddressKind::PhoneNumber, problem);
    if number.is_empty() {
        return Err(fail(AddressProblem::Empty));
    }
    if let Some(c) = number.chars().find(|&c| !(c.is_ascii_digit() || c == '+')) {
        return Err(fail(AddressProblem::Character(c)));
    }
    let Some(digits) = number.strip_prefix('+') else {
        return Err(fail(AddressProblem::Number("it does not start with `+`")));
    };
    if digits.contains('+') {
        return Err(fail(AddressProblem::Number("it has a `+` after the first")));
    }
    if digits.len() < MIN_PHONE_DIGITS {
        return Err(fail(AddressProblem::Number("it has fewer than 8 digits")));
    }
    if digits.len() > MAX_PHONE_DIGITS {
        return Err(fail(AddressProblem::Number("it has more than 15 digits")));
    }
    if digits.starts_with('0') {
        return Err(fail(AddressProblem::Number(
            "its country code starts with 0",
        )));
    }
    Ok(())
}

/// Checks the recipient of outbound `tool`: an email address for
/// `communication.send_email`, a phone number for `send_sms` and
/// `place_call`, a connection's name (no control characters; whether the
/// agent has it is the caller's to check) for `integration.execute`.
/// Other tools have no recipient: nothing is checked.
///
/// # Errors
///
/// As [`check_email_address`] and [`check_phone_number`].
pub fn check_recipient(tool: ControlTool, recipient: &str) -> Result<(), AddressError> {
    match tool {
        ControlTool::SendEmail => check_email_address(recipient),
        ControlTool::SendSms | ControlTool::PlaceCall => check_phone_number(recipient),
        ControlTool::IntegrationExecute => {
            let fail = |problem| fail(AddressKind::ConnectionName, problem);
            if recipient.trim().is_empty() {
                return Err(fail(AddressProblem::Empty));
            }
            match recipient.chars().find(|c| c.is_control()) {
                Some(c) => Err(fail(AddressProblem::Character(c))),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Checks the path of an `integration.execute` call: `/`, then the
/// printable ASCII a URL's path and query may hold (`%` escapes for
/// anything else), at most [`MAX_API_PATH_BYTES`]. Whether the joined URL
/// stays on the connection's host is checked again when it is delivered.
///
/// # Errors
///
/// What is wrong, without the path itself.
pub fn check_api_path(path: &str) -> Result<(), AddressError> {
    let fail = |problem| fail(AddressKind::ApiPath, problem);
    if path.is_empty() {
        return Err(fail(AddressProblem::Empty));
    }
    // RFC 3986's unreserved, sub-delims, `:`, `@`, `/`, `?` and `%`.
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/?%".contains(c);
    if let Some(c) = path.chars().find(|&c| !allowed(c)) {
        return Err(fail(AddressProblem::Character(c)));
    }
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(fail(AddressProblem::Malformed {
            part: "start",
            problem: "is not one `/`",
        }));
    }
    if path.len() > MAX_API_PATH_BYTES {
        return Err(fail(AddressProblem::TooLong {
            part: "length",
            bytes: path.len(),
            max: MAX_API_PATH_BYTES,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_addresses_pass() {
        for good in [
            "depot@fleet.example",
            "shinagawa@fleet.example",
            "kenji.sato+inspections@example.co.jp",
            "o'brien@example.com",
            "a_b-c!#$%&*/=?^`{|}~@mail-1.example.org",
            "x@xn--fsqu00a.example",
            "user@sub.sub2.example.com",
            &format!("{}@example.com", "a".repeat(MAX_LOCAL_PART_BYTES)),
            &format!(
                "a@{}.{}.{}.{}",
                "b".repeat(63),
                "c".repeat(63),
                "d".repeat(63),
                "e".repeat(61)
            ),
        ] {
            assert_eq!(check_email_address(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn addresses_that_are_not_exactly_one_mailbox_are_refused() {
        let problem = |address: &str| check_email_address(address).unwrap_err().problem;
        // The finding: an address that shows as another on a terminal.
        assert_eq!(
            problem("boss@attacker.example\u{1b}[16Dfleet.example\u{1b}[K"),
            AddressProblem::Character('\u{1b}')
        );
        assert_eq!(
            problem("boss\u{1b}[4D\u{1b}[K@fleet.example"),
            AddressProblem::Character('\u{1b}')
        );
        for (bad, c) in [
            ("a b@example.com", ' '),
            ("a@example.com, b@example.com", ','),
            ("Boss <boss@example.com>", ' '),
            ("<boss@example.com>", '<'),
            ("\"a b\"@example.com", '"'),
            ("boss@example.com\r\nBcc: x@example.com", '\r'),
            ("boss@example.com\n", '\n'),
            ("b\u{7f}@example.com", '\u{7f}'),
            ("b\u{9b}31m@example.com", '\u{9b}'),
            ("b\u{202e}@example.com", '\u{202e}'),
            ("b\u{200b}@example.com", '\u{200b}'),
            ("josé@example.com", 'é'),
            ("a@例え.jp", '例'),
            ("a(comment)@example.com", '('),
            ("a@[127.0.0.1]", '['),
            ("a@example.com;b", ';'),
            ("a@b_c.example", '_'),
        ] {
            assert_eq!(problem(bad), AddressProblem::Character(c), "{bad:?}");
        }
        assert_eq!(problem(""), AddressProblem::Empty);
        assert_eq!(problem("boss.example.com"), AddressProblem::AtSigns(0));
        assert_eq!(problem("a@b@example.com"), AddressProblem::AtSigns(2));
        for bad in [
            "@example.com",
            ".a@example.com",
            "a.@example.com",
            "a..b@example.com",
            "a@",
            "a@localhost",
            "a@.example.com",
            "a@example..com",
            "a@example.com.",
            "a@-example.com",
            "a@example-.com",
            "a@1.2.3.4",
        ] {
            assert!(
                matches!(problem(bad), AddressProblem::Malformed { .. }),
                "{bad:?}: {:?}",
                problem(bad)
            );
        }
        let long_local = format!("{}@example.com", "a".repeat(MAX_LOCAL_PART_BYTES + 1));
        assert_eq!(
            problem(&long_local),
            AddressProblem::TooLong {
                part: "local part",
                bytes: 65,
                max: 64
            }
        );
        let long_label = format!("a@{}.com", "b".repeat(MAX_LABEL_BYTES + 1));
        assert!(matches!(
            problem(&long_label),
            AddressProblem::TooLong {
                part: "domain label",
                ..
            }
        ));
        let long_domain = format!("a@{}com", "b.".repeat(128));
        assert!(matches!(
            problem(&long_domain),
            AddressProblem::TooLong { part: "domain", .. }
        ));
    }

    #[test]
    fn refusals_say_what_is_wrong_without_the_address() {
        let e = check_email_address("boss@attacker.example\u{1b}[16Dfleet.example").unwrap_err();
        let text = e.to_string();
        assert_eq!(
            text,
            r"is not one email address (`name@example.com`): it holds the control character \u{1b}"
        );
        assert!(!text.contains('\u{1b}') && !text.contains("attacker"));
        assert_eq!(
            check_email_address("Boss <b@x.example>")
                .unwrap_err()
                .problem
                .to_string(),
            "it holds a space"
        );
        assert_eq!(
            check_email_address("a@b@c.example")
                .unwrap_err()
                .problem
                .to_string(),
            "it has 2 `@`, not one"
        );
        assert_eq!(
            check_phone_number("+81 90").unwrap_err().to_string(),
            "is not a phone number in E.164 form (`+`, then 8 to 15 digits, the first not 0): it holds a space"
        );
    }

    #[test]
    fn phone_numbers_are_e164() {
        for good in [
            "+819012345678",
            "+15550100",
            "+815012340001",
            "+123456789012345",
        ] {
            assert_eq!(check_phone_number(good), Ok(()), "{good}");
        }
        let problem = |number: &str| check_phone_number(number).unwrap_err().problem;
        assert_eq!(problem(""), AddressProblem::Empty);
        for (bad, c) in [
            ("+81 90 0000 0000", ' '),
            ("+81-90-0000-0000", '-'),
            ("+81(90)00000000", '('),
            ("+819012345678\u{1b}[2K", '\u{1b}'),
            ("+８１９０１２３４５６７８", '８'),
            ("tel:+819012345678", 't'),
        ] {
            assert_eq!(problem(bad), AddressProblem::Character(c), "{bad:?}");
        }
        for bad in [
            "819012345678",
            "+1555010",
            "+1234567890123456",
            "+0819012345678",
            "+81+9012345678",
            "+",
        ] {
            assert!(
                matches!(problem(bad), AddressProblem::Number(_)),
                "{bad:?}: {:?}",
                problem(bad)
            );
        }
    }

    #[test]
    fn each_outbound_tool_checks_its_own_kind_of_recipient() {
        assert!(check_recipient(ControlTool::SendEmail, "a@example.com").is_ok());
        assert_eq!(
            check_recipient(ControlTool::SendEmail, "+819012345678")
                .unwrap_err()
                .expected,
            AddressKind::EmailAddress
        );
        for tool in [ControlTool::SendSms, ControlTool::PlaceCall] {
            assert!(check_recipient(tool, "+819012345678").is_ok());
            assert_eq!(
                check_recipient(tool, "a@example.com").unwrap_err().expected,
                AddressKind::PhoneNumber
            );
        }
        assert!(check_recipient(ControlTool::IntegrationExecute, "orders api").is_ok());
        assert_eq!(
            check_recipient(ControlTool::IntegrationExecute, "orders\u{1b}[2K")
                .unwrap_err()
                .problem,
            AddressProblem::Character('\u{1b}')
        );
        assert_eq!(
            check_recipient(ControlTool::IntegrationExecute, " ")
                .unwrap_err()
                .problem,
            AddressProblem::Empty
        );
        assert!(check_recipient(ControlTool::SubmitResult, "").is_ok());
    }

    #[test]
    fn api_paths_are_printable_url_paths() {
        for good in ["/", "/v1/orders", "/v1/orders?id=7&x=%20y", "/a:b@c;d,e"] {
            assert_eq!(check_api_path(good), Ok(()), "{good}");
        }
        let problem = |path: &str| check_api_path(path).unwrap_err().problem;
        assert_eq!(problem(""), AddressProblem::Empty);
        assert_eq!(
            problem("/v1/\u{1b}[2J"),
            AddressProblem::Character('\u{1b}')
        );
        assert_eq!(problem("/v1/a b"), AddressProblem::Character(' '));
        assert_eq!(problem("/v1/<x>"), AddressProblem::Character('<'));
        assert_eq!(
            problem("/v1/caf\u{e9}"),
            AddressProblem::Character('\u{e9}')
        );
        assert!(matches!(problem("v1/x"), AddressProblem::Malformed { .. }));
        assert!(matches!(
            problem("//evil.example/x"),
            AddressProblem::Malformed { .. }
        ));
        let long = format!("/{}", "a".repeat(MAX_API_PATH_BYTES));
        assert!(matches!(problem(&long), AddressProblem::TooLong { .. }));
    }
}

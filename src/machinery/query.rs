//! Query parameters of resource requests, parsed and checked the way
//! kube-apiserver's parameter codec and `ValidateListOptions` do.

use serde_json::json;

use super::status::{ApiError, FieldError};

/// The raw query as (name, value) pairs, in order (names may repeat: `dryRun`).
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let raw = raw.unwrap_or("");
        serde_urlencoded::from_str::<Vec<(String, String)>>(raw)
            .map(Query)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some("true" | "1" | "True" | "TRUE" | "t" | "T") => Ok(Some(true)),
            Some("false" | "0" | "False" | "FALSE" | "f" | "F" | "") => Ok(Some(false)),
            Some(v) => Err(bad_param(name, v)),
        }
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| bad_param(name, v)),
        }
    }
}

fn bad_param(name: &str, value: &str) -> ApiError {
    ApiError::bad_request(format!("invalid value {value:?} for query parameter {name:?}"))
}

/// How a list or watch chooses its starting revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    Unset,
    NotOlderThan,
    Exact,
}

/// A resourceVersion parameter: "" (latest), "0" (any), or a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rv {
    Unset,
    Any,
    At(u64),
}

impl Rv {
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            None | Some("") => Ok(Rv::Unset),
            Some("0") => Ok(Rv::Any),
            Some(v) => v
                .parse::<u64>()
                .map(Rv::At)
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}"))),
        }
    }
}

/// Options of a list or watch (metav1.ListOptions).
#[derive(Debug, Clone)]
pub struct ListOptions {
    pub label_selector: String,
    pub field_selector: String,
    pub watch: bool,
    pub allow_bookmarks: bool,
    pub rv: Rv,
    pub rv_match: RvMatch,
    pub timeout_seconds: Option<u64>,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    pub fn from_query(q: &Query) -> Result<Self, ApiError> {
        let rv_match = match q.get("resourceVersionMatch") {
            None | Some("") => RvMatch::Unset,
            Some("NotOlderThan") => RvMatch::NotOlderThan,
            Some("Exact") => RvMatch::Exact,
            Some(other) => {
                return Err(list_invalid(vec![FieldError::new(
                    super::status::FieldErrorKind::NotSupported,
                    "resourceVersionMatch",
                    "supported values: \"Exact\", \"NotOlderThan\", \"\"",
                )
                .with_value(&json!(other))]))
            }
        };
        let limit = match q.int("limit")? {
            Some(l) if l > 0 => Some(l as usize),
            _ => None,
        };
        let opts = ListOptions {
            label_selector: q.get("labelSelector").unwrap_or("").to_string(),
            field_selector: q.get("fieldSelector").unwrap_or("").to_string(),
            watch: q.bool("watch")?.unwrap_or(false),
            allow_bookmarks: q.bool("allowWatchBookmarks")?.unwrap_or(false),
            rv: Rv::parse(q.get("resourceVersion"))?,
            rv_match,
            timeout_seconds: q.int("timeoutSeconds")?.map(|t| t.max(0) as u64),
            limit,
            continue_token: q.get("continue").filter(|c| !c.is_empty()).map(str::to_string),
            send_initial_events: q.bool("sendInitialEvents")?,
        };
        opts.validate()?;
        Ok(opts)
    }

    /// The checks of apimachinery's ValidateListOptions, with its wording.
    fn validate(&self) -> Result<(), ApiError> {
        let mut errs = Vec::new();
        let rv_text = match self.rv {
            Rv::Unset => "",
            Rv::Any => "0",
            Rv::At(_) => "n",
        };
        if self.continue_token.is_some() && self.rv_match != RvMatch::Unset {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if self.send_initial_events.is_some() {
            if !self.watch {
                errs.push(FieldError::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
            } else {
                if self.rv_match != RvMatch::NotOlderThan {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if !self.allow_bookmarks && self.send_initial_events == Some(true) {
                    errs.push(FieldError::forbidden(
                        "allowWatchBookmarks",
                        "sendInitialEvents requires setting allowWatchBookmarks to true",
                    ));
                }
            }
        } else if self.watch {
            if self.rv_match != RvMatch::Unset {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
        } else if self.rv_match != RvMatch::Unset {
            if rv_text.is_empty() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if self.rv_match == RvMatch::Exact && rv_text == "0" {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if self.continue_token.is_some() && !matches!(self.rv, Rv::Unset | Rv::Any) {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(list_invalid(errs))
        }
    }
}

fn list_invalid(errs: Vec<FieldError>) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", &errs)
}

/// `fieldValidation`: what to do with unknown and duplicate fields in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Options shared by create, update and patch.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
}

impl WriteOptions {
    pub fn from_query(q: &Query) -> Result<Self, ApiError> {
        Ok(Self { dry_run: dry_run(q)?, field_validation: field_validation(q)? })
    }
}

/// `dryRun`: only `All` is defined.
pub fn dry_run(q: &Query) -> Result<bool, ApiError> {
    let mut dry = false;
    for v in q.all("dryRun") {
        match v {
            "All" => dry = true,
            "" => {}
            other => {
                return Err(ApiError::bad_request(format!("Invalid dry run value: {other}: supported values: \"All\"")))
            }
        }
    }
    Ok(dry)
}

fn field_validation(q: &Query) -> Result<FieldValidation, ApiError> {
    // kube-apiserver's default since fieldValidation went GA is Warn.
    match q.get("fieldValidation") {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: \"{other}\" (supported: Ignore, Warn, Strict)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(q: &str) -> Result<ListOptions, ApiError> {
        ListOptions::from_query(&Query::parse(Some(q)).unwrap())
    }

    #[test]
    fn list_option_rules_follow_kube() {
        assert!(opts("resourceVersion=5&resourceVersionMatch=Exact").is_ok());
        let e = opts("resourceVersionMatch=NotOlderThan").unwrap_err();
        assert_eq!(e.code, 422);
        assert!(e.message.contains("resourceVersionMatch is forbidden unless resourceVersion is provided"));
        assert_eq!(opts("resourceVersion=0&resourceVersionMatch=Exact").unwrap_err().code, 422);
        assert_eq!(opts("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan").unwrap_err().code, 422);
        assert!(opts("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
            .is_ok());
        assert_eq!(opts("limit=x").unwrap_err().code, 400);
        assert_eq!(opts("continue=abc&resourceVersion=3").unwrap_err().code, 400);
        assert_eq!(opts("resourceVersion=abc").unwrap_err().code, 400);
    }

    #[test]
    fn dry_run_only_all() {
        assert!(dry_run(&Query::parse(Some("dryRun=All")).unwrap()).unwrap());
        assert_eq!(dry_run(&Query::parse(Some("dryRun=Some")).unwrap()).unwrap_err().code, 400);
    }
}

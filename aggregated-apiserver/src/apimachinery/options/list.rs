//! `metav1.ListOptions` of list, watch and deletecollection, decoded from the
//! query the way kube-apiserver's parameter codec does and checked with
//! `ValidateListOptions`' rules and wording.

use serde_json::json;

use super::params::Query;
use crate::apimachinery::errors::ApiError;
use crate::apimachinery::field_error::{FieldError, FieldErrorKind};
use crate::apimachinery::gofmt::{go_parse_uint64, go_quote};

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
    /// Parses it as kube's storage does (`strconv.ParseUint`, so no sign), with
    /// the list handler's wording for a bad one:
    /// `invalid resource version: resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax`.
    /// (kube-apiserver 1.34 sends the text after the first colon as a 500
    /// for a get or watch; a 400 is the right answer there too.)
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            None | Some("") => Ok(Rv::Unset),
            Some("0") => Ok(Rv::Any),
            Some(v) => go_parse_uint64(v).map(Rv::At).map_err(|e| {
                ApiError::bad_request(format!(
                    "invalid resource version: resourceVersion: Invalid value: {}: {e}",
                    go_quote(v)
                ))
            }),
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
        // The parameter codec converts every field before anything is
        // validated, so a malformed integer is a 400 even when the
        // resourceVersionMatch is unsupported too (422).
        let timeout_seconds = q.int("timeoutSeconds")?;
        // kube treats a limit of zero or less as no limit.
        let limit = q.int("limit")?.filter(|l| *l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        let rv_match = match q.get("resourceVersionMatch") {
            None | Some("") => RvMatch::Unset,
            Some("NotOlderThan") => RvMatch::NotOlderThan,
            Some("Exact") => RvMatch::Exact,
            Some(other) => {
                return Err(list_invalid(vec![FieldError::new(
                    FieldErrorKind::NotSupported,
                    "resourceVersionMatch",
                    "supported values: \"Exact\", \"NotOlderThan\", \"\"",
                )
                .with_value(&json!(other))]))
            }
        };
        let opts = ListOptions {
            label_selector: q.get("labelSelector").unwrap_or("").to_string(),
            field_selector: q.get("fieldSelector").unwrap_or("").to_string(),
            watch: q.bool("watch").unwrap_or(false),
            allow_bookmarks: q.bool("allowWatchBookmarks").unwrap_or(false),
            rv: Rv::parse(q.get("resourceVersion"))?,
            rv_match,
            timeout_seconds: timeout_seconds.map(|t| t.max(0).unsigned_abs()),
            limit,
            continue_token: q.get("continue").filter(|c| !c.is_empty()).map(str::to_string),
            send_initial_events: q.bool("sendInitialEvents"),
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
        // A list checks this after decoding the token (kube's storage does,
        // so a bad token is reported first): only a watch is refused here.
        if self.watch && self.continue_token.is_some() && !matches!(self.rv, Rv::Unset | Rv::Any) {
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
        assert_eq!(opts("limit=").unwrap_err().message, "strconv.ParseInt: parsing \"\": invalid syntax");
        assert_eq!(opts("timeoutSeconds=1.5").unwrap_err().code, 400);
        assert_eq!(opts("limit=-3").unwrap().limit, None);
        assert!(opts("watch=TRUE").unwrap().watch && opts("watch=T").unwrap().watch && opts("watch=").unwrap().watch);
        assert!(!opts("watch=FALSE").unwrap().watch && !opts("watch=0").unwrap().watch);
        // An integer error comes before a 422 from validation, as in kube.
        assert_eq!(opts("resourceVersionMatch=x&limit=x").unwrap_err().code, 400);
        assert_eq!(opts("watch=1&continue=abc&resourceVersion=3").unwrap_err().code, 400);
        assert!(opts("continue=abc&resourceVersion=3").is_ok(), "a list decides after decoding the token");
        assert_eq!(
            opts("resourceVersion=abc").unwrap_err().message,
            "invalid resource version: resourceVersion: Invalid value: \"abc\": strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
        assert_eq!(opts("resourceVersion=%2B5").unwrap_err().code, 400);
    }
}

//! The raw query of a request and the conversions kube-apiserver's parameter
//! codec applies to it (apimachinery `pkg/runtime/conversion.go`,
//! `Convert_Slice_string_To_*`): every typed option reads its parameters
//! through these, so a boolean or an integer means the same on every verb.

use crate::apimachinery::errors::ApiError;
use crate::apimachinery::gofmt::{go_equal_fold, go_parse_int64};

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

    /// The first value of a parameter: kube's conversions of a single-valued
    /// option read `values[0]` and ignore the rest.
    /// The parameters, in the order sent.
    pub fn into_pairs(self) -> Vec<(String, String)> {
        self.0
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of a parameter, in order (for list-valued options: `dryRun`).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A boolean option, `None` when absent. Never an error: see [`go_param_bool`].
    pub fn bool(&self, name: &str) -> Option<bool> {
        self.get(name).map(go_param_bool)
    }

    /// An int64 option, `None` when absent. A present value must parse as
    /// Go's `strconv.ParseInt(v, 10, 64)` does; an empty value is an error too
    /// (`limit=` is a 400 in kube, not "no limit").
    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name).map(go_parse_int64).transpose().map_err(ApiError::bad_request)
    }
}

/// `Convert_Slice_string_To_bool`: only "0" and any case of "false" are false;
/// anything else, the empty string, `yes`, `T` and `TRUE` included, is true.
/// This is also how the request-info step decides whether a GET is a watch,
/// so authorization and the handler always agree on the verb.
pub fn go_param_bool(value: &str) -> bool {
    !(value == "0" || go_equal_fold(value, "false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_follow_convert_slice_string_to_bool() {
        for v in ["true", "TRUE", "T", "t", "1", "yes", "", "on", "2", " false"] {
            assert!(go_param_bool(v), "{v:?} is true in kube");
        }
        for v in ["false", "FALSE", "False", "fAlSe", "0", "fal\u{17F}e"] {
            assert!(!go_param_bool(v), "{v:?} is false in kube");
        }
    }

    #[test]
    fn the_first_value_of_a_repeated_parameter_wins() {
        let q = Query::parse(Some("watch=false&watch=true&limit=x&limit=1")).unwrap();
        assert_eq!(q.bool("watch"), Some(false));
        assert_eq!(q.int("limit").unwrap_err().message, "strconv.ParseInt: parsing \"x\": invalid syntax");
        assert_eq!(q.bool("absent"), None);
    }
}

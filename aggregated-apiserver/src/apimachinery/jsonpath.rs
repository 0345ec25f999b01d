//! The JSONPath of a CRD's printer columns (`additionalPrinterColumns[].jsonPath`,
//! client-go's `util/jsonpath`), in the part of its language such paths use: fields
//! (`.spec.replicas`, `['a.b']`), array indexes (`[0]`, `[-1]`), every element (`[*]`,
//! `.*`), and filters comparing a field with a literal (`[?(@.type=="Ready")]`,
//! `!=`, or a field's mere presence, `[?(@.reason)]`). Missing keys yield nothing, as
//! kube-apiserver's table convertor asks (`AllowMissingKeys`).

use serde_json::Value;

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter { path: Vec<Step>, test: Test },
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    Exists,
    Equals(Value),
    Differs(Value),
}

impl JsonPath {
    /// Parses `path`, which starts with `.` (as a CRD requires); the error says
    /// what of it is not understood.
    pub fn parse(path: &str) -> Result<Self, String> {
        if !path.starts_with('.') {
            return Err(format!("{path:?} must be a simple json path starting with ."));
        }
        let mut parser = Parser { text: path, at: 0 };
        let steps =
            parser.steps(false).map_err(|why| format!("{path:?} is not a JSONPath this server evaluates: {why}"))?;
        Ok(Self { steps })
    }

    /// Every value the path reaches in `obj`, in order.
    pub fn find<'a>(&self, obj: &'a Value) -> Vec<&'a Value> {
        walk(&self.steps, vec![obj])
    }

    /// The first value the path reaches, as a table cell takes it.
    pub fn first<'a>(&self, obj: &'a Value) -> Option<&'a Value> {
        self.find(obj).into_iter().next()
    }
}

fn walk<'a>(steps: &[Step], mut at: Vec<&'a Value>) -> Vec<&'a Value> {
    for step in steps {
        let mut next = Vec::new();
        for value in at {
            match (step, value) {
                (Step::Field(name), Value::Object(map)) => next.extend(map.get(name)),
                (Step::Index(i), Value::Array(items)) => {
                    let i = if *i < 0 { items.len() as i64 + i } else { *i };
                    // Out of bounds is an error to client-go: the cell is empty either way.
                    next.extend(usize::try_from(i).ok().and_then(|i| items.get(i)));
                }
                (Step::All, Value::Array(items)) => next.extend(items.iter()),
                (Step::All, Value::Object(map)) => next.extend(map.values()),
                (Step::Filter { path, test }, Value::Array(items)) => {
                    next.extend(items.iter().filter(|item| passes(path, test, item)));
                }
                _ => {}
            }
        }
        at = next;
    }
    at
}

fn passes(path: &[Step], test: &Test, item: &Value) -> bool {
    let found = walk(path, vec![item]);
    match test {
        Test::Exists => !found.is_empty(),
        Test::Equals(literal) => found.len() == 1 && same(found[0], literal),
        Test::Differs(literal) => found.len() == 1 && !same(found[0], literal),
    }
}

/// Equality as Go's template comparison sees a JSON value and a literal:
/// numbers by value, whatever their JSON spelling.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn eat(&mut self, prefix: &str) -> bool {
        let found = self.rest().starts_with(prefix);
        if found {
            self.at += prefix.len();
        }
        found
    }

    /// Steps up to the end, or (in a filter) up to the comparison or `)`.
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Step>, String> {
        let mut steps = Vec::new();
        loop {
            let rest = self.rest();
            if rest.is_empty() || (in_filter && (rest.starts_with(')') || rest.starts_with(['=', '!', '<', '>', ' '])))
            {
                return Ok(steps);
            }
            if self.eat("..") {
                return Err("recursive descent (..) is not supported".into());
            }
            if self.eat(".") {
                if self.rest().is_empty() && steps.is_empty() {
                    // "." alone: the object itself.
                    return Ok(steps);
                }
                if self.eat("*") {
                    steps.push(Step::All);
                    continue;
                }
                let name = self.name();
                if name.is_empty() {
                    return Err(format!("a field name is missing at {}", self.at));
                }
                steps.push(Step::Field(name));
            } else if self.eat("[") {
                steps.push(self.bracket()?);
            } else {
                return Err(format!("unexpected {:?}", self.rest()));
            }
        }
    }

    fn name(&mut self) -> String {
        let end = self.rest().find(['.', '[', ')', '=', '!', '<', '>', ' ']).unwrap_or(self.rest().len());
        let name = self.rest()[..end].to_string();
        self.at += end;
        name
    }

    fn bracket(&mut self) -> Result<Step, String> {
        let step = if self.eat("*") {
            Step::All
        } else if self.eat("?(@") {
            let path = self.steps(true)?;
            let _ = self.eat(" ");
            let test = if self.eat(")") {
                return self.close(Step::Filter { path, test: Test::Exists });
            } else if self.eat("==") {
                Test::Equals(self.literal()?)
            } else if self.eat("!=") {
                Test::Differs(self.literal()?)
            } else {
                return Err(format!("unsupported filter at {:?}", self.rest()));
            };
            if !self.eat(")") {
                return Err("a filter must end with )".into());
            }
            Step::Filter { path, test }
        } else if let Some(quote) = ['\'', '"'].into_iter().find(|q| self.rest().starts_with(*q)) {
            self.at += 1;
            let end = self.rest().find(quote).ok_or("an unclosed quoted field name")?;
            let name = self.rest()[..end].to_string();
            self.at += end + 1;
            Step::Field(name)
        } else {
            let end = self.rest().find(']').ok_or("an unclosed [")?;
            let index = &self.rest()[..end];
            let index = index.trim().parse::<i64>().map_err(|_| format!("unsupported array index {index:?}"))?;
            self.at += end;
            Step::Index(index)
        };
        self.close(step)
    }

    fn close(&mut self, step: Step) -> Result<Step, String> {
        if self.eat("]") {
            Ok(step)
        } else {
            Err(format!("expected ] at {:?}", self.rest()))
        }
    }

    fn literal(&mut self) -> Result<Value, String> {
        let _ = self.eat(" ");
        if let Some(quote) = ['\'', '"'].into_iter().find(|q| self.rest().starts_with(*q)) {
            self.at += 1;
            let end = self.rest().find(quote).ok_or("an unclosed string")?;
            let text = self.rest()[..end].to_string();
            self.at += end + 1;
            return Ok(Value::String(text));
        }
        let end = self.rest().find(')').ok_or("a filter must end with )")?;
        let text = self.rest()[..end].trim();
        let value = match text {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            number => serde_json::from_str::<serde_json::Number>(number)
                .map(Value::Number)
                .map_err(|_| format!("unsupported literal {number:?}"))?,
        };
        self.at += end;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn first(path: &str, obj: &Value) -> Option<Value> {
        JsonPath::parse(path).unwrap().first(obj).cloned()
    }

    #[test]
    fn fields_indexes_and_filters_reach_what_client_go_reaches() {
        let obj = json!({
            "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "x"}},
            "spec": {"replicas": 3, "ports": [{"port": 80}, {"port": 443}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False", "reason": "Slow"}
            ]}
        });
        assert_eq!(first(".spec.replicas", &obj), Some(json!(3)));
        assert_eq!(first(".spec.ports[1].port", &obj), Some(json!(443)));
        assert_eq!(first(".spec.ports[-1].port", &obj), Some(json!(443)));
        assert_eq!(first(".spec.ports[*].port", &obj), Some(json!(80)));
        assert_eq!(first(".metadata.labels['app.kubernetes.io/name']", &obj), Some(json!("x")));
        assert_eq!(first(r#".status.conditions[?(@.type=="Ready")].status"#, &obj), Some(json!("True")));
        assert_eq!(first(".status.conditions[?(@.type=='Synced')].status", &obj), Some(json!("False")));
        assert_eq!(first(r#".status.conditions[?(@.type!="Ready")].type"#, &obj), Some(json!("Synced")));
        assert_eq!(first(".status.conditions[?(@.reason)].type", &obj), Some(json!("Synced")));
        assert_eq!(first(".spec.ports[?(@.port==443)].port", &obj), Some(json!(443)));
        assert_eq!(first(".", &obj), Some(obj.clone()));
        // Missing keys, wrong shapes and out-of-bounds indexes reach nothing.
        for missing in [".spec.nothing", ".spec.replicas.deeper", ".spec.ports[5]", ".metadata[0]"] {
            assert_eq!(first(missing, &obj), None, "{missing}");
        }
    }

    #[test]
    fn what_it_does_not_evaluate_is_refused_by_name() {
        for (path, why) in [
            ("spec.replicas", "must be a simple json path starting with ."),
            ("..spec", "recursive descent"),
            (".spec.ports[0:1]", "unsupported array index"),
            (".spec[?(@.a>1)]", "unsupported filter"),
            (".spec.ports[0", "an unclosed ["),
        ] {
            let error = JsonPath::parse(path).unwrap_err();
            assert!(error.contains(why), "{path}: {error}");
        }
    }
}

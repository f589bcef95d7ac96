//! What a tool is compared against: the parameters and body fields of the operation it calls,
//! or of several (a composite tool such as GitHub's `push_files`: their union). The body is the
//! JSON one where there is one, else the form one (`application/x-www-form-urlencoded`,
//! `multipart/form-data`: every Stripe and Slack write), compared field by field alike.

use crate::contract::{BodyShape, MediaBody, Operation, Param, Property, WriteSemantics};
use crate::finding::Location;

pub struct Expected<'c> {
    /// The operation ids, `+`-joined for a composite.
    pub label: String,
    pub params: Vec<&'c Param>,
    pub body: Body<'c>,
    /// The collection word before each path parameter that follows a literal segment.
    pub collections: Vec<(String, String)>,
}

pub enum Body<'c> {
    /// No body a tool could fill.
    None,
    /// An object body (or variants of one), field by field.
    Fields(Vec<Field<'c>>),
    /// A body that is not an object: compared whole, as one `requestBody` argument.
    Whole {
        media: &'c MediaBody,
        required: bool,
    },
}

pub struct Field<'c> {
    pub property: &'c Property,
    /// Omitting it on this write clears it (a full replace).
    pub clears: bool,
    /// Declared by every variant of the body, so a tool that omits it is missing it.
    pub always: bool,
}

impl<'c> Expected<'c> {
    /// `ops` (at least one) with `write` overriding each one's semantics where the map says so.
    pub fn of(ops: &[&'c Operation], write: Option<WriteSemantics>) -> Expected<'c> {
        let mut params: Vec<&Param> = Vec::new();
        let mut body = Body::None;
        for op in ops {
            for p in &op.params {
                if !params
                    .iter()
                    .any(|q| q.location == p.location && q.name == p.name)
                {
                    params.push(p);
                }
            }
            let clears = write.unwrap_or(op.write) == WriteSemantics::Replace;
            body = merge(body, body_of(op, clears));
        }
        Expected {
            label: ops
                .iter()
                .map(|o| o.id.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            params,
            body,
            collections: (ops.iter())
                .flat_map(|op| super::bind::collections(&op.template))
                .collect(),
        }
    }

    pub fn params_in(&self, loc: Location) -> impl Iterator<Item = &&'c Param> {
        self.params.iter().filter(move |p| p.location == loc)
    }

    pub fn is_param(&self, loc: Location, name: &str) -> bool {
        self.params_in(loc).any(|p| match loc {
            Location::Header => p.name.eq_ignore_ascii_case(name),
            _ => p.name == name,
        })
    }

    pub fn is_field(&self, name: &str) -> bool {
        match &self.body {
            Body::Fields(fields) => fields
                .iter()
                .any(|f| f.property.name == name && !f.property.read_only),
            _ => false,
        }
    }
}

/// The body media a tool fills: the JSON one, else a form with fields.
pub fn body_media(op: &Operation) -> Option<&MediaBody> {
    let media = &op.body.as_ref()?.media;
    media.iter().find(|m| m.json).or_else(|| {
        media
            .iter()
            .find(|m| !matches!(&*m.shape, BodyShape::Opaque))
    })
}

/// The body of one operation: JSON first, then a form.
fn body_of(op: &Operation, clears: bool) -> Body<'_> {
    let (Some(body), Some(media)) = (&op.body, body_media(op)) else {
        return Body::None;
    };
    let mut fields = Vec::new();
    match &*media.shape {
        BodyShape::Object { properties, .. } => {
            // What the resource's GET marks `readOnly` is the API's, as `readOnly` itself is.
            for property in properties.iter().filter(|p| !op.computed.contains(&p.name)) {
                fields.push(Field {
                    property,
                    clears,
                    always: true,
                });
            }
        }
        BodyShape::Variants(branches) => {
            let objects: Vec<&[Property]> = branches
                .iter()
                .filter_map(|(_, shape)| match shape {
                    BodyShape::Object { properties, .. } => Some(properties.as_slice()),
                    _ => None,
                })
                .collect();
            if objects.len() != branches.len() {
                return Body::Whole {
                    media,
                    required: body.required,
                };
            }
            for properties in &objects {
                for property in properties.iter().filter(|p| !op.computed.contains(&p.name)) {
                    if fields
                        .iter()
                        .any(|f: &Field| f.property.name == property.name)
                    {
                        continue;
                    }
                    let always = objects
                        .iter()
                        .all(|o| o.iter().any(|p| p.name == property.name));
                    fields.push(Field {
                        property,
                        clears,
                        always,
                    });
                }
            }
        }
        _ => {
            return Body::Whole {
                media,
                required: body.required,
            };
        }
    }
    Body::Fields(fields)
}

/// Two operations' bodies as one: fields side by side (the first declaration of a name wins,
/// a field clears where either write would clear it).
fn merge<'c>(a: Body<'c>, b: Body<'c>) -> Body<'c> {
    match (a, b) {
        (Body::None, b) => b,
        (a, Body::None) => a,
        (Body::Fields(mut a), Body::Fields(b)) => {
            for field in b {
                match a
                    .iter_mut()
                    .find(|f| f.property.name == field.property.name)
                {
                    Some(f) => f.clears |= field.clears,
                    None => a.push(field),
                }
            }
            Body::Fields(a)
        }
        (a @ Body::Whole { .. }, _) | (_, a @ Body::Whole { .. }) => a,
    }
}

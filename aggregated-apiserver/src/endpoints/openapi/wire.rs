//! The protobuf wire format, as far as the OpenAPI documents need it: varints,
//! 64-bit doubles and length-delimited fields
//! (<https://protobuf.dev/programming-guides/encoding/>). It knows no message:
//! [`super::gnostic`] says which field number a value goes to.

/// The wire types used here.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;

/// A message being written, field after field.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Fields already encoded, appended as they are.
    pub fn append(&mut self, encoded: &[u8]) {
        self.buf.extend_from_slice(encoded);
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u64) {
        self.varint((u64::from(field) << 3) | wire_type);
    }

    /// A string, bytes or a nested message: its length, then its bytes.
    pub fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.tag(field, LENGTH_DELIMITED);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    pub fn bool(&mut self, field: u32, value: bool) {
        self.tag(field, VARINT);
        self.varint(u64::from(value));
    }

    /// An int64: negative values as their two's complement, ten bytes long.
    pub fn int64(&mut self, field: u32, value: i64) {
        self.tag(field, VARINT);
        self.varint(value as u64);
    }

    pub fn double(&mut self, field: u32, value: f64) {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_as_the_encoding_guide_writes_them() {
        let mut w = Writer::default();
        w.int64(1, 150);
        assert_eq!(w.into_bytes(), [0x08, 0x96, 0x01]);
        let mut w = Writer::default();
        w.bytes(2, b"testing");
        assert_eq!(w.into_bytes(), b"\x12\x07testing");
        let mut w = Writer::default();
        w.int64(1, -2);
        assert_eq!(w.into_bytes(), [0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        let mut w = Writer::default();
        w.bool(16, true);
        w.double(3, 1.0);
        assert_eq!(w.into_bytes(), [0x80, 0x01, 0x01, 0x19, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
    }
}

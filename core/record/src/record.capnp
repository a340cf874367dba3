@0xb2ffe1629407f516;
# Wire form of tessera::record::GenericRecord (the bytes stored as map values).
# Never reuse or renumber a field or union member; only append.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::record::wire");

struct Record {
  typeName @0 :Text;
  fields @1 :List(Field);
}

struct Field {
  name @0 :Text;
  value @1 :Value;
}

struct Value {
  union {
    null @0 :Void;
    int32 @1 :Int32;
    int64 @2 :Int64;
    float64 @3 :Float64;
    bool @4 :Bool;
    string @5 :Text;
    bytes @6 :Data;
    record @7 :Record;
    list @8 :List(Value);
  }
}

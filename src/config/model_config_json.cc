#include "config/model_config_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "nlohmann/json.hpp"

namespace tide::config {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using nlohmann::json;

json MessageJson(const Message& message);

json ScalarJson(const Message& m, const Reflection* r, const FieldDescriptor* f, int index) {
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32: return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL: return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return std::string(rep ? r->GetRepeatedEnum(m, f, index)->name() : r->GetEnum(m, f)->name());
    case FieldDescriptor::CPPTYPE_STRING: return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

json MessageJson(const Message& message) {
  const Reflection* r = message.GetReflection();
  const auto* d = message.GetDescriptor();
  json out = json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      json map = json::object();
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* value = f->message_type()->map_value();
      for (int j = 0; j < r->FieldSize(message, f); ++j) {
        const Message& entry = r->GetRepeatedMessage(message, f, j);
        const json k = ScalarJson(entry, entry.GetReflection(), key, -1);
        map[k.is_string() ? k.get<std::string>() : k.dump()] = ScalarJson(entry, entry.GetReflection(), value, -1);
      }
      out[std::string(f->name())] = std::move(map);
    } else if (f->is_repeated()) {
      json list = json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j) list.push_back(ScalarJson(message, r, f, j));
      out[std::string(f->name())] = std::move(list);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !r->HasField(message, f)) {
      continue;  // an unset message (as protobuf's JSON printer, which Triton uses, leaves it out)
    } else {
      out[std::string(f->name())] = ScalarJson(message, r, f, -1);
    }
  }
  return out;
}

}  // namespace

std::string ModelConfigJson(const ModelConfig& config) {
  return MessageJson(config).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tide::config

// The part of the Redis module API (Redis >= 7.0) this module uses, declared
// here: Redis does not package its header.  The values and signatures are
// those of Redis's module ABI, version 1.  Each function is a pointer that
// load_api() fills in OnLoad from the table Redis hands the module.
#pragma once

#include <cstddef>

extern "C" {

struct RedisModuleCtx;
struct RedisModuleKey;
struct RedisModuleString;
struct RedisModuleScanCursor;
struct RedisModuleCallReply;
struct RedisModuleServerInfoData;
struct RedisModuleCommandFilterCtx;
struct RedisModuleCommandFilter;

// A server event: its id and the version of its data.
struct RedisModuleEvent {
    unsigned long long id;
    unsigned long long dataver;
};

}  // extern "C"

namespace ratelimit::redis {

using Ctx = RedisModuleCtx;
using Key = RedisModuleKey;
using String = RedisModuleString;
using Event = RedisModuleEvent;

constexpr int kOk = 0;
constexpr int kErr = 1;
constexpr int kApiVersion1 = 1;

// OpenKey modes.
constexpr int kRead = 1 << 0;
constexpr int kWrite = 1 << 1;

// KeyType results.
constexpr int kKeyEmpty = 0;
constexpr int kKeyString = 1;
constexpr int kKeyHash = 3;

// HashGet / HashSet flags: fields given as C strings.
constexpr int kHashCFields = 1 << 2;

// CallReplyType results.
constexpr int kReplyString = 0;
constexpr int kReplyArray = 3;
constexpr int kReplyNull = 4;

// GetContextFlags: the AOF is on; used memory is over maxmemory.
constexpr int kCtxAof = 1 << 6;
constexpr int kCtxOutOfMemory = 1 << 10;

// SubscribeToServerEvent: this Redis became a master or a replica.
constexpr Event kEventRoleChanged = {0, 1};

// NotifyKeyspaceEvent classes.
constexpr int kNotifyGeneric = 1 << 2;
constexpr int kNotifyString = 1 << 3;
constexpr int kNotifyHash = 1 << 6;

// KeyAtPosWithFlags: the key is read and written, its data used and
// updated (as EVAL declares its keys).
constexpr int kKeyReadWrite = 1 << 1;
constexpr int kKeyAccess = 1 << 4;
constexpr int kKeyUpdate = 1 << 5;

inline String *const kHashDelete = reinterpret_cast<String *>(1);

using CommandFunc = int (*)(Ctx *ctx, String **argv, int argc);
using CommandFilterFunc = void (*)(RedisModuleCommandFilterCtx *filter);
using EventFunc = void (*)(Ctx *ctx, Event event,
                           unsigned long long subevent, void *data);
using ScanKeyFunc = void (*)(Key *key, String *field, String *value,
                             void *data);

inline int (*GetApi)(const char *name, void *slot);
inline void (*SetModuleAttribs)(Ctx *ctx, const char *name, int version,
                                int api_version);
inline int (*IsModuleNameBusy)(const char *name);
inline int (*CreateCommand)(Ctx *ctx, const char *name, CommandFunc func,
                            const char *flags, int first_key, int last_key,
                            int key_step);
inline int (*IsKeysPositionRequest)(Ctx *ctx);
inline void (*KeyAtPos)(Ctx *ctx, int pos);
inline void (*KeyAtPosWithFlags)(Ctx *ctx, int pos, int flags);
inline int (*GetContextFlags)(Ctx *ctx);

inline Key *(*OpenKey)(Ctx *ctx, String *name, int mode);
inline void (*CloseKey)(Key *key);
inline int (*KeyType)(Key *key);
inline int (*DeleteKey)(Key *key);
inline int (*SetAbsExpire)(Key *key, long long expire_ms);
inline char *(*StringDMA)(Key *key, std::size_t *len, int mode);
inline int (*StringTruncate)(Key *key, std::size_t len);
inline RedisModuleCallReply *(*Call)(Ctx *ctx, const char *command,
                                     const char *format, ...);
inline void (*FreeCallReply)(RedisModuleCallReply *reply);
inline int (*CallReplyType)(RedisModuleCallReply *reply);
inline const char *(*CallReplyStringPtr)(RedisModuleCallReply *reply,
                                         std::size_t *len);
inline long long (*CallReplyInteger)(RedisModuleCallReply *reply);
inline RedisModuleCallReply *(*CallReplyArrayElement)(
    RedisModuleCallReply *reply, std::size_t index);
inline int (*HashGet)(Key *key, int flags, ...);
inline int (*HashSet)(Key *key, int flags, ...);
inline RedisModuleScanCursor *(*ScanCursorCreate)();
inline void (*ScanCursorDestroy)(RedisModuleScanCursor *cursor);
inline int (*ScanKey)(Key *key, RedisModuleScanCursor *cursor,
                      ScanKeyFunc func, void *data);

inline String *(*CreateString)(Ctx *ctx, const char *bytes, std::size_t len);
inline void (*FreeString)(Ctx *ctx, String *str);
inline const char *(*StringPtrLen)(const String *str, std::size_t *len);

inline int (*Replicate)(Ctx *ctx, const char *command, const char *format,
                        ...);
inline RedisModuleServerInfoData *(*GetServerInfo)(Ctx *ctx,
                                                   const char *section);
inline void (*FreeServerInfo)(Ctx *ctx, RedisModuleServerInfoData *data);
inline unsigned long long (*ServerInfoGetFieldUnsigned)(
    RedisModuleServerInfoData *data, const char *field, int *out_err);
inline RedisModuleCommandFilter *(*RegisterCommandFilter)(
    Ctx *ctx, CommandFilterFunc func, int flags);
inline String *(*CommandFilterArgGet)(RedisModuleCommandFilterCtx *filter,
                                      int pos);
inline int (*SubscribeToServerEvent)(Ctx *ctx, Event event,
                                     EventFunc func);
inline int (*NotifyKeyspaceEvent)(Ctx *ctx, int type, const char *event,
                                  String *key);

inline int (*WrongArity)(Ctx *ctx);
inline int (*ReplyWithArray)(Ctx *ctx, long len);
inline int (*ReplyWithLongLong)(Ctx *ctx, long long value);
inline int (*ReplyWithError)(Ctx *ctx, const char *error);

// Fills in every pointer above from the table Redis passed with `ctx`;
// false if this Redis lacks one that is required (KeyAtPosWithFlags is
// not: a Redis before 7.0 has KeyAtPos only).
bool load_api(Ctx *ctx) noexcept;

}  // namespace ratelimit::redis

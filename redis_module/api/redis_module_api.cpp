#include "api/redis_module_api.hpp"

namespace ratelimit::redis {

namespace {

template <typename F>
bool get(const char *name, F *slot)
{
    return GetApi(name, reinterpret_cast<void *>(slot)) == kOk;
}

}  // namespace

bool load_api(Ctx *ctx) noexcept
{
    // The first word of the context Redis hands OnLoad is its GetApi.
    GetApi = reinterpret_cast<int (*)(const char *, void *)>(
        *reinterpret_cast<void **>(ctx));

    get("RedisModule_KeyAtPosWithFlags", &KeyAtPosWithFlags);

    return get("RedisModule_SetModuleAttribs", &SetModuleAttribs)
           && get("RedisModule_IsModuleNameBusy", &IsModuleNameBusy)
           && get("RedisModule_CreateCommand", &CreateCommand)
           && get("RedisModule_IsKeysPositionRequest",
                  &IsKeysPositionRequest)
           && get("RedisModule_KeyAtPos", &KeyAtPos)
           && get("RedisModule_GetContextFlags", &GetContextFlags)
           && get("RedisModule_OpenKey", &OpenKey)
           && get("RedisModule_CloseKey", &CloseKey)
           && get("RedisModule_KeyType", &KeyType)
           && get("RedisModule_DeleteKey", &DeleteKey)
           && get("RedisModule_SetAbsExpire", &SetAbsExpire)
           && get("RedisModule_StringDMA", &StringDMA)
           && get("RedisModule_StringTruncate", &StringTruncate)
           && get("RedisModule_Call", &Call)
           && get("RedisModule_FreeCallReply", &FreeCallReply)
           && get("RedisModule_CallReplyType", &CallReplyType)
           && get("RedisModule_CallReplyStringPtr", &CallReplyStringPtr)
           && get("RedisModule_CallReplyInteger", &CallReplyInteger)
           && get("RedisModule_CallReplyArrayElement",
                  &CallReplyArrayElement)
           && get("RedisModule_HashGet", &HashGet)
           && get("RedisModule_HashSet", &HashSet)
           && get("RedisModule_ScanCursorCreate", &ScanCursorCreate)
           && get("RedisModule_ScanCursorDestroy", &ScanCursorDestroy)
           && get("RedisModule_ScanKey", &ScanKey)
           && get("RedisModule_CreateString", &CreateString)
           && get("RedisModule_FreeString", &FreeString)
           && get("RedisModule_StringPtrLen", &StringPtrLen)
           && get("RedisModule_Replicate", &Replicate)
           && get("RedisModule_GetServerInfo", &GetServerInfo)
           && get("RedisModule_FreeServerInfo", &FreeServerInfo)
           && get("RedisModule_ServerInfoGetFieldUnsigned",
                  &ServerInfoGetFieldUnsigned)
           && get("RedisModule_RegisterCommandFilter",
                  &RegisterCommandFilter)
           && get("RedisModule_CommandFilterArgGet", &CommandFilterArgGet)
           && get("RedisModule_SubscribeToServerEvent",
                  &SubscribeToServerEvent)
           && get("RedisModule_NotifyKeyspaceEvent", &NotifyKeyspaceEvent)
           && get("RedisModule_WrongArity", &WrongArity)
           && get("RedisModule_ReplyWithArray", &ReplyWithArray)
           && get("RedisModule_ReplyWithLongLong", &ReplyWithLongLong)
           && get("RedisModule_ReplyWithError", &ReplyWithError);
}

}  // namespace ratelimit::redis

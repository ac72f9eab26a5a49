"""What every call to a service passes through before its handler runs.

    server = grpc.server(pool, interceptors=[TokenCheck(token), RequestCheck()])

``TokenCheck`` refuses a call whose ``authorization`` metadata is not ``Bearer TOKEN``
(UNAUTHENTICATED, compared in constant time). ``RequestCheck`` answers a request that does
not parse as its message (bytes that are not protobuf, a string that is not UTF-8) with
INVALID_ARGUMENT and the parser's reason, where gRPC would say INTERNAL with no reason.
"""

from __future__ import annotations

import hmac

import grpc

__all__ = ["RequestCheck", "TokenCheck"]


class TokenCheck(grpc.ServerInterceptor):
    """Refuses every call whose ``authorization`` metadata is not ``Bearer TOKEN``."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong token; set $MARIN_SERVICES_TOKEN or read it from "
                          "the cluster registry's token file")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        given = dict(handler_call_details.invocation_metadata).get("authorization", "")
        if hmac.compare_digest(given.encode(), self._expected):
            return continuation(handler_call_details)
        return self._deny


class _Unparsable:
    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class RequestCheck(grpc.ServerInterceptor):
    """Refuses a unary request that does not parse, with INVALID_ARGUMENT."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer \
                is None:
            return handler
        parse, behaviour = handler.request_deserializer, handler.unary_unary

        def deserialize(data: bytes):
            try:
                return parse(data)
            except Exception as e:  # protobuf's DecodeError
                return _Unparsable(str(e))

        def checked(request, context):
            if isinstance(request, _Unparsable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"malformed request to {handler_call_details.method}: "
                              f"{request.reason}")
            return behaviour(request, context)

        return handler._replace(request_deserializer=deserialize, unary_unary=checked)

#!/usr/bin/env python3
"""The fleet-maintenance API of Hane Fleet Leasing, a customer's HTTP API.

A small real service for hane's connection tests: an agent reads a
vehicle's service history and the open service slots of a depot, and books
a slot (through a person's approval, delivered exactly once). Written with
FastAPI, which generates the OpenAPI 3.1 document (`openapi.json` beside
this file) from the code. The vehicles are those of the example ledger
(`examples/ledger/records/vehicles.csv`), by registration.

Its packages (FastAPI, uvicorn) are pinned in tests/requirements.txt and
installed by `cargo xtask test` into the virtual environment
target/test-env/venv.

Usage:

    app.py --port 0 --token TOKEN [--host 127.0.0.1] [--port-file PATH]
           [--today YYYY-MM-DD] [--exit-with-stdin]
           [--ssl-certfile PATH --ssl-keyfile PATH]
    app.py --print-openapi

The first line on stdout is the port the service listens on (useful with
--port 0, which picks a free one), printed once it accepts connections;
with --port-file it is also written to PATH (whole, by a rename), at the
same moment. Everything else goes to stderr.

--token TOKEN      every API request must carry `Authorization: Bearer TOKEN`,
                   else it is answered 401
--today DATE       the day the slots follow (default: today in Japan): each
                   depot has slots on the ten weekdays after it, at 9:00,
                   11:00 and 14:00 Japan time, two hours each
--exit-with-stdin  exit when stdin reaches end of file, so the service dies
                   with the test process that holds the other end
--ssl-certfile PATH, --ssl-keyfile PATH
                   serve HTTPS (test controls included) with this
                   certificate chain and private key, both PEM
--print-openapi    print the generated OpenAPI document (JSON, sorted keys,
                   indent 2) and exit

Test controls, outside the OpenAPI document and needing no token:

GET  /_test/requests  the requests received: counts per operationId and the
                      total, each request (its operationId, method, path,
                      Idempotency-Key and whether it carried the right
                      token; never the token itself), and the bookings made
POST /_test/behavior  {"operationId": ..., "mode": ...} makes one operation
                      misbehave after counting the request (and checking its
                      token): "hang" sleeps 120 s before answering, "error"
                      answers 503, "large" answers a JSON body of 8 MiB,
                      "redirect" answers 302 to http://127.0.0.1:9/elsewhere,
                      "incomplete" does the operation's work and answers its
                      JSON without the first field of each object (a booking
                      without its "id"); "normal" undoes it
POST /_test/reset     forgets the requests, the bookings and the behaviors
"""

import argparse
import asyncio
import datetime as dt
import enum
import hmac
import json
import logging
import os
import socket
import sys
from typing import Annotated, Literal

try:
    import uvicorn
    from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request, Response
    from fastapi.responses import JSONResponse, RedirectResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as error:
    sys.stderr.write(
        f"{error}; `cargo xtask test` provisions FastAPI and uvicorn in target/test-env/venv\n"
    )
    sys.exit(3)

log = logging.getLogger("fleet-maintenance")

# Where the service sends a redirected request: the discard port, where
# nothing listens.
REDIRECT_TARGET = "http://127.0.0.1:9/elsewhere"
# How long a hanging operation sleeps: far past any client's timeout.
HANG_SECONDS = 120
# The size of the body a "large" operation answers.
LARGE_BYTES = 8 * 1024 * 1024
JST = dt.timezone(dt.timedelta(hours=9), "JST")


# The data ------------------------------------------------------------------


class ServiceKind(str, enum.Enum):
    """What was done to the vehicle."""

    statutory_inspection = "statutory_inspection"
    scheduled_maintenance = "scheduled_maintenance"
    oil_change = "oil_change"
    tyre_change = "tyre_change"
    repair = "repair"


class Depot(str, enum.Enum):
    """A depot where vehicles are serviced."""

    Shinagawa = "Shinagawa"
    Kawasaki = "Kawasaki"
    Yokohama = "Yokohama"


class ServiceRecord(BaseModel):
    """One service a vehicle had."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "date": "2026-03-24",
                    "kind": "statutory_inspection",
                    "mileage": 44120,
                    "depot": "Shinagawa",
                    "notes": "Passed; certificate valid to 2027-03-31.",
                }
            ]
        }
    )

    date: dt.date = Field(description="The day of the service.")
    kind: ServiceKind
    mileage: int = Field(ge=0, description="The odometer reading at the service, in km.")
    depot: Depot = Field(description="The depot that did the service.")
    notes: str = Field(description="What the mechanic wrote down.")


class Slot(BaseModel):
    """An open service slot of a depot."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "SHI-20260706-0900",
                    "depot": "Shinagawa",
                    "start": "2026-07-06T09:00:00+09:00",
                    "end": "2026-07-06T11:00:00+09:00",
                }
            ]
        }
    )

    id: str = Field(description="The slot's identifier, to book it with.")
    depot: Depot
    start: dt.datetime = Field(description="When the slot starts (Japan time).")
    end: dt.datetime = Field(description="When the slot ends (Japan time).")


class BookingRequest(BaseModel):
    """A booking to make: a vehicle into a slot."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "registration": "架空 300 あ 10-02",
                    "slot": "SHI-20260706-0900",
                    "note": "Statutory inspection due 2027-03-31.",
                }
            ]
        },
    )

    registration: str = Field(description="The vehicle's registration plate.")
    slot: str = Field(description="The id of an open slot, from listServiceSlots.")
    note: str | None = Field(
        default=None, max_length=500, description="A note for the depot."
    )


class Booking(BaseModel):
    """A booked service slot."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "B-0001",
                    "registration": "架空 300 あ 10-02",
                    "slot": "SHI-20260706-0900",
                    "status": "booked",
                    "createdAt": "2026-06-30T01:02:03Z",
                }
            ]
        }
    )

    id: str = Field(description="The booking's identifier.")
    registration: str = Field(description="The vehicle's registration plate.")
    slot: str = Field(description="The id of the booked slot.")
    status: Literal["booked"] = Field(description="The booking's state.")
    createdAt: dt.datetime = Field(title="Created at", description="When the booking was made (UTC).")


class Error(BaseModel):
    """What went wrong."""

    detail: str = Field(description="A sentence saying what went wrong.")


# The vehicles of examples/ledger/records/vehicles.csv, by registration,
# with their depots; each service's mileage stays below the ledger's.
VEHICLES = {
    "架空 300 あ 10-02": Depot.Shinagawa,
    "架空 500 さ 12-34": Depot.Shinagawa,
    "架空 400 か 77-10": Depot.Kawasaki,
    "架空 100 た 20-20": Depot.Yokohama,
    "架空 300 な 05-55": Depot.Kawasaki,
}


def record(date, kind, mileage, depot, notes):
    return ServiceRecord(
        date=dt.date.fromisoformat(date), kind=kind, mileage=mileage, depot=depot, notes=notes
    )


K = ServiceKind
SERVICES = {
    "架空 300 あ 10-02": [
        record("2025-03-18", K.statutory_inspection, 21450, Depot.Shinagawa,
               "Passed; certificate valid to 2026-03-31."),
        record("2025-09-10", K.oil_change, 33080, Depot.Shinagawa,
               "Engine oil and oil filter replaced."),
        record("2025-11-27", K.tyre_change, 38650, Depot.Shinagawa,
               "Studless winter tyres fitted; summer tyres stored at the depot."),
        record("2026-03-24", K.statutory_inspection, 44120, Depot.Shinagawa,
               "Passed; certificate valid to 2027-03-31. Rear brake pads replaced."),
    ],
    "架空 500 さ 12-34": [
        record("2025-06-12", K.scheduled_maintenance, 68200, Depot.Shinagawa,
               "12-month inspection; wiper blades and cabin filter replaced."),
        record("2025-12-09", K.statutory_inspection, 79830, Depot.Shinagawa,
               "Passed; certificate valid to 2026-12-15."),
        record("2026-04-21", K.repair, 87410, Depot.Shinagawa,
               "Alternator replaced after a charging warning."),
    ],
    "架空 400 か 77-10": [
        record("2026-01-09", K.scheduled_maintenance, 35, Depot.Kawasaki,
               "Pre-delivery inspection before the lease started."),
        record("2026-05-14", K.oil_change, 8120, Depot.Kawasaki, "First oil change."),
    ],
    "架空 100 た 20-20": [
        record("2024-09-20", K.statutory_inspection, 98740, Depot.Yokohama,
               "Passed; certificate valid to 2026-09-30."),
        record("2025-08-05", K.scheduled_maintenance, 117300, Depot.Yokohama,
               "12-month inspection; hybrid battery health good."),
        record("2026-02-17", K.tyre_change, 126020, Depot.Yokohama,
               "All four tyres replaced (tread below 2 mm)."),
    ],
    # New in January 2026: nothing serviced yet.
    "架空 300 な 05-55": [],
}


def slots_after(today):
    """Every depot's slots on the ten weekdays after `today`: at 9:00,
    11:00 and 14:00 Japan time, two hours each."""
    days = []
    day = today
    while len(days) < 10:
        day += dt.timedelta(days=1)
        if day.weekday() < 5:
            days.append(day)
    slots = {}
    for depot in Depot:
        for day in days:
            for hour in (9, 11, 14):
                start = dt.datetime(day.year, day.month, day.day, hour, tzinfo=JST)
                slot = Slot(
                    id=f"{depot.value[:3].upper()}-{day:%Y%m%d}-{hour:02}00",
                    depot=depot,
                    start=start,
                    end=start + dt.timedelta(hours=2),
                )
                slots[slot.id] = slot
    return slots


# What the service remembers ------------------------------------------------


OPERATIONS = ("getServiceHistory", "listServiceSlots", "bookServiceSlot", "getBooking")
MODES = ("normal", "hang", "error", "large", "redirect", "incomplete")


class State:
    def __init__(self, token):
        self.token = token
        self.slots = {}
        self.reset()

    def reset(self):
        self.requests = []
        self.bookings = {}
        self.by_key = {}
        self.behaviors = {}


state = State(token=None)


# The API -------------------------------------------------------------------


bearer = HTTPBearer(
    auto_error=False,
    description="The API token issued to the client (the service's `--token`).",
)


class Misbehave(Exception):
    """Answers `response` instead of what the operation would."""

    def __init__(self, response):
        self.response = response


async def observe(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
):
    """Counts the request, refuses it without the token, then misbehaves as
    /_test/behavior said."""
    operation = request.scope["route"].operation_id
    authorized = (
        credentials is not None
        and state.token is not None
        and hmac.compare_digest(credentials.credentials.encode(), state.token.encode())
    )
    state.requests.append(
        {
            "operationId": operation,
            "method": request.method,
            "path": request.url.path,
            "authorized": authorized,
            "idempotencyKey": request.headers.get("idempotency-key"),
        }
    )
    if not authorized:
        raise HTTPException(
            status_code=401,
            detail="missing or wrong bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    mode = state.behaviors.get(operation, "normal")
    if mode == "hang":
        log.info("%s: hanging for %s s", operation, HANG_SECONDS)
        await asyncio.sleep(HANG_SECONDS)
    elif mode == "error":
        raise Misbehave(JSONResponse({"detail": "service unavailable"}, status_code=503))
    elif mode == "large":
        raise Misbehave(Response(large_body(), media_type="application/json"))
    elif mode == "redirect":
        raise Misbehave(RedirectResponse(REDIRECT_TARGET, status_code=302))


def large_body():
    head, tail = b'{"padding":"', b'"}'
    return head + b"x" * (LARGE_BYTES - len(head) - len(tail)) + tail


UNAUTHORIZED = {401: {"model": Error, "description": "Missing or wrong bearer token."}}

app = FastAPI(
    title="Fleet Maintenance API",
    version="1.0.0",
    description=(
        "Service histories and service bookings for the vehicles Hane Fleet Leasing "
        "leases out. Vehicles are named by their registration plate (such as "
        "`架空 300 あ 10-02`); depots are Shinagawa, Kawasaki and Yokohama. Every "
        "operation needs `Authorization: Bearer TOKEN`."
    ),
)
app.add_exception_handler(Misbehave, lambda request, exc: exc.response)


@app.middleware("http")
async def incomplete(request: Request, call_next):
    """Answers an operation in "incomplete" mode, once it has done its work,
    without the first field of each object of its JSON."""
    response = await call_next(request)
    route = request.scope.get("route")
    operation = getattr(route, "operation_id", None)
    if operation is None or state.behaviors.get(operation) != "incomplete":
        return response
    body = b"".join([chunk async for chunk in response.body_iterator])
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    try:
        value = json.loads(body)
    except ValueError:
        return Response(body, status_code=response.status_code, headers=headers)

    def without_first(item):
        if isinstance(item, dict) and item:
            first = next(iter(item))
            return {k: v for k, v in item.items() if k != first}
        return item

    value = [without_first(v) for v in value] if isinstance(value, list) else without_first(value)
    return Response(
        json.dumps(value, ensure_ascii=False).encode(),
        status_code=response.status_code,
        headers=headers,
    )

api = APIRouter(dependencies=[Depends(observe)], responses=UNAUTHORIZED)


def vehicle(registration):
    if registration not in VEHICLES:
        raise HTTPException(status_code=404, detail=f"no vehicle with registration {registration!r}")


@api.get(
    "/vehicles/{registration}/services",
    operation_id="getServiceHistory",
    summary="Get a vehicle's service history",
    description=(
        "The services a vehicle had, oldest first: statutory inspections, scheduled "
        "maintenance, oil and tyre changes and repairs, with the mileage and the depot. "
        "A known vehicle that was never serviced has an empty history."
    ),
    response_model=list[ServiceRecord],
    response_description="The vehicle's services, oldest first.",
    responses={404: {"model": Error, "description": "No vehicle has this registration."}},
    tags=["vehicles"],
)
async def get_service_history(registration: str):
    vehicle(registration)
    return SERVICES[registration]


@api.get(
    "/slots",
    operation_id="listServiceSlots",
    summary="List the open service slots of a depot",
    description=(
        "The slots of a depot that are still open (not booked), earliest first, "
        "optionally only those starting on one day (Japan time). Each depot offers "
        "slots on the next ten weekdays, at 9:00, 11:00 and 14:00, two hours each."
    ),
    response_model=list[Slot],
    response_description="The open slots, earliest first.",
    tags=["slots"],
)
async def list_service_slots(
    depot: Annotated[Depot, Query(description="The depot.")],
    date: Annotated[
        dt.date | None, Query(description="Only slots starting on this day (ISO 8601).")
    ] = None,
):
    taken = {booking.slot for booking in state.bookings.values()}
    return [
        slot
        for slot in state.slots.values()
        if slot.depot == depot
        and slot.id not in taken
        and (date is None or slot.start.date() == date)
    ]


@api.post(
    "/bookings",
    operation_id="bookServiceSlot",
    summary="Book a service slot for a vehicle",
    description=(
        "Books an open slot for a vehicle. With an `Idempotency-Key`, a request "
        "repeated with the same key and body books nothing new and answers the first "
        "booking again, with 200; the same key with a different body is answered 422."
    ),
    status_code=201,
    response_model=Booking,
    response_description="The booking made.",
    responses={
        200: {"model": Booking, "description": "The booking this Idempotency-Key made before."},
        404: {"model": Error, "description": "No such vehicle or slot."},
        409: {"model": Error, "description": "The slot is already booked."},
        422: {
            "description": (
                "The request is not valid, or its Idempotency-Key was used before "
                "with a different body."
            ),
            "content": {
                "application/json": {
                    "schema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/HTTPValidationError"},
                            {"$ref": "#/components/schemas/Error"},
                        ]
                    }
                }
            },
        },
    },
    tags=["bookings"],
)
async def book_service_slot(
    body: BookingRequest,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=255,
            description="Makes retries safe: the same key books at most once.",
        ),
    ] = None,
):
    if idempotency_key is not None and idempotency_key in state.by_key:
        earlier_body, booking_id = state.by_key[idempotency_key]
        if earlier_body != body:
            raise HTTPException(
                status_code=422, detail="this Idempotency-Key was used with a different request"
            )
        response.status_code = 200
        return state.bookings[booking_id]
    vehicle(body.registration)
    if body.slot not in state.slots:
        raise HTTPException(status_code=404, detail=f"no slot {body.slot!r}")
    if any(booking.slot == body.slot for booking in state.bookings.values()):
        raise HTTPException(status_code=409, detail=f"slot {body.slot!r} is already booked")
    booking = Booking(
        id=f"B-{len(state.bookings) + 1:04}",
        registration=body.registration,
        slot=body.slot,
        status="booked",
        createdAt=dt.datetime.now(dt.timezone.utc).replace(microsecond=0),
    )
    state.bookings[booking.id] = booking
    if idempotency_key is not None:
        state.by_key[idempotency_key] = (body, booking.id)
    log.info("booked %s: %s into %s", booking.id, booking.registration, booking.slot)
    return booking


@api.get(
    "/bookings/{id}",
    operation_id="getBooking",
    summary="Get a booking",
    description="A booking made with bookServiceSlot, by its id.",
    response_model=Booking,
    response_description="The booking.",
    responses={404: {"model": Error, "description": "No booking has this id."}},
    tags=["bookings"],
)
async def get_booking(id: str):
    if id not in state.bookings:
        raise HTTPException(status_code=404, detail=f"no booking {id!r}")
    return state.bookings[id]


app.include_router(api)


# The test controls ---------------------------------------------------------


class Behavior(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operationId: Literal[OPERATIONS]
    mode: Literal[MODES]


@app.get("/_test/requests", include_in_schema=False)
async def test_requests():
    counts = {operation: 0 for operation in OPERATIONS}
    for request in state.requests:
        counts[request["operationId"]] += 1
    return {
        "total": len(state.requests),
        "counts": counts,
        "requests": state.requests,
        "bookings": [booking.model_dump(mode="json") for booking in state.bookings.values()],
    }


@app.post("/_test/behavior", include_in_schema=False)
async def test_behavior(behavior: Behavior):
    if behavior.mode == "normal":
        state.behaviors.pop(behavior.operationId, None)
    else:
        state.behaviors[behavior.operationId] = behavior.mode
    return {"operationId": behavior.operationId, "mode": behavior.mode}


@app.post("/_test/reset", include_in_schema=False)
async def test_reset():
    state.reset()
    return {"reset": True}


# Running -------------------------------------------------------------------


def openapi_json():
    return json.dumps(app.openapi(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


async def exit_with_stdin():
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    log.info("stdin closed; exiting")
    os._exit(0)


def announce(port, port_file):
    if port_file:
        temporary = f"{port_file}.tmp"
        with open(temporary, "w") as f:
            f.write(f"{port}\n")
        os.replace(temporary, port_file)
    print(port, flush=True)


async def serve(args):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it, an answer written in two
    # pieces (head, then body) waits for the client's delayed ACK, 40 ms.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind((args.host, args.port))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,
            timeout_graceful_shutdown=1,
            lifespan="off",
            ssl_certfile=args.ssl_certfile,
            ssl_keyfile=args.ssl_keyfile,
        )
    )
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    while not server.started:
        if serving.done():
            serving.result()
            sys.exit("fleet-maintenance: the server stopped before it started")
        await asyncio.sleep(0.01)
    port = listener.getsockname()[1]
    announce(port, args.port_file)
    log.info("listening on %s:%s", args.host, port)
    if args.exit_with_stdin:
        asyncio.ensure_future(exit_with_stdin())
    await serving


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--token")
    parser.add_argument("--port-file")
    parser.add_argument("--today", type=dt.date.fromisoformat)
    parser.add_argument("--exit-with-stdin", action="store_true")
    parser.add_argument("--print-openapi", action="store_true")
    parser.add_argument("--ssl-certfile")
    parser.add_argument("--ssl-keyfile")
    args = parser.parse_args()
    if args.print_openapi:
        sys.stdout.buffer.write(openapi_json().encode())
        return
    if args.port is None or not args.token:
        parser.error("--port and --token are required (or --print-openapi)")
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        parser.error("--ssl-certfile and --ssl-keyfile go together")
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s"
    )
    state.token = args.token
    state.slots = slots_after(args.today or dt.datetime.now(JST).date())
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

# Paddock Python kernel driver: run by the guest agent as `python3 -u -c`.
# Standard library only, so it works in any template with python3.
# fd 3: requests from the agent, one JSON object per line.
# fd 4: events to the agent, one JSON object per line.
# After each cell: the marker on fd 1 and fd 2, then {"type":"done"} on fd 4.
import ast, base64, builtins, io, json, linecache, os, sys, traceback, warnings

_cmd = os.fdopen(3, "rb", buffering=0)
_evf = 4
os.set_inheritable(3, False)
os.set_inheritable(4, False)
_marker = os.environ.pop("PADDOCK_KERNEL_MARKER", "").encode()
_max_item = int(os.environ.pop("PADDOCK_KERNEL_MAX_ITEM", "8388608"))
os.environ.setdefault("MPLBACKEND", "Agg")
# Debian's matplotlib reads only /etc/matplotlibrc, which templates that
# bind the host's /usr do not have: point it at the packaged defaults.
_rc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
if "MATPLOTLIBRC" not in os.environ and not os.path.exists("/etc/matplotlibrc") and os.path.exists(_rc):
    os.environ["MATPLOTLIBRC"] = _rc
if "MPLCONFIGDIR" not in os.environ and not os.access(os.path.expanduser("~"), os.W_OK):
    os.environ["MPLCONFIGDIR"] = "/tmp/.paddock-matplotlib"
warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
warnings.filterwarnings("ignore", message=".*non-interactive.*")
sys.stdin = open(os.devnull)
sys.argv = [""]


def _send(obj):
    data = (json.dumps(obj) + "\n").encode()
    while data:
        n = os.write(_evf, data)
        data = data[n:]


_MIME_METHODS = [
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_json_", "application/json"),
]


def _as_text(mime, v):
    if isinstance(v, (bytes, bytearray)):
        if mime.startswith("image/") and mime != "image/svg+xml":
            return base64.b64encode(v).decode()
        return v.decode("utf-8", "replace")
    if mime == "application/json" and not isinstance(v, str):
        return json.dumps(v, default=str)
    if isinstance(v, tuple):  # (data, metadata)
        return _as_text(mime, v[0])
    return str(v)


def _figure_bundle(fig):
    data = {}
    for fmt, mime in (("png", "image/png"), ("svg", "image/svg+xml")):
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format=fmt)
        except Exception:
            continue
        data[mime] = buf.getvalue()
    data["text/plain"] = "<Figure size %dx%d>" % tuple(int(x) for x in fig.get_size_inches() * fig.dpi)
    return data


def _bundle(obj):
    data = {}
    mod = type(obj).__module__ or ""
    if mod.startswith("matplotlib.figure"):
        data.update(_figure_bundle(obj))
    rmb = getattr(obj, "_repr_mimebundle_", None)
    if callable(rmb) and not isinstance(obj, type):
        try:
            r = rmb()
            if isinstance(r, tuple):
                r = r[0]
            if isinstance(r, dict):
                data.update(r)
        except Exception:
            pass
    for meth, mime in _MIME_METHODS:
        f = getattr(obj, meth, None)
        if mime in data or not callable(f) or isinstance(obj, type):
            continue
        try:
            v = f()
        except Exception:
            continue
        if v is not None:
            data[mime] = v
    if mod.startswith("pandas") and "application/json" not in data and hasattr(obj, "to_json"):
        try:
            orient = "split" if hasattr(obj, "columns") else "index"
            data["application/json"] = obj.to_json(orient=orient, date_format="iso", default_handler=str)
        except Exception:
            pass
    if "text/plain" not in data:
        try:
            data["text/plain"] = repr(obj)
        except Exception as e:
            data["text/plain"] = "<repr failed: %s>" % type(e).__name__
    out, omitted = {}, {}
    for mime, v in data.items():
        t = _as_text(mime, v)
        if len(t) > _max_item:
            omitted[mime] = len(t)
        else:
            out[mime] = t
    if omitted:
        note = "; ".join("%s of %d bytes omitted (larger than %d)" % (m, n, _max_item) for m, n in omitted.items())
        out["text/plain"] = out.get("text/plain", "") + ("\n" if "text/plain" in out else "") + "[" + note + "]"
    return out, omitted


def _emit(obj, main=False):
    data, omitted = _bundle(obj)
    ev = {"type": "result", "result": {"data": data}}
    if main:
        ev["result"]["is_main_result"] = True
    if omitted:
        ev["result"]["omitted"] = omitted
    _send(ev)


def display(*objs):
    """Shows each object as a rich result of the running cell."""
    for o in objs:
        _emit(o)


builtins.display = display


def _flush_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = plt.get_fignums()
    except Exception:
        return
    for n in nums:
        try:
            _emit(plt.figure(n))
        except Exception as e:
            _send({"type": "stderr", "text": "figure %s: %s\n" % (n, e)})
    try:
        plt.close("all")
    except Exception:
        pass


_ns = {"__name__": "__main__", "__builtins__": builtins}


def _run(code, count):
    fname = "<cell-%d>" % count
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    tree = ast.parse(code, fname, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, fname, "exec"), _ns)
    value = None
    if last is not None:
        value = eval(compile(last, fname, "eval"), _ns)
    _flush_figures()
    if value is not None:
        builtins._ = value
        _emit(value, main=True)


def _error(e):
    tb = e.__traceback__
    # Drop the driver's own frames.
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    if isinstance(e, SyntaxError):
        tb = None
    text = "".join(traceback.format_exception(type(e), e, tb))
    _send({"type": "error", "error": {"name": type(e).__name__, "value": str(e), "traceback": text}})


def _finish(count):
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    for fd in (1, 2):
        try:
            os.write(fd, _marker)
        except OSError:
            pass
    _send({"type": "done", "execution_count": count})


def _main():
    count = 0
    while True:
        try:
            line = _cmd.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return
        try:
            req = json.loads(line)
            count += 1
            os.environ.update(req.get("env") or {})
            _send({"type": "started"})
            _run(req.get("code", ""), count)
        except BaseException as e:  # SystemExit and KeyboardInterrupt too
            try:
                _error(e)
            except KeyboardInterrupt:
                pass
        try:
            _finish(count)
        except KeyboardInterrupt:
            _finish(count)


_main()

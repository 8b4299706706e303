"""Resident-memory readings of this process from /proc/self (Linux), shared by the PyTorch peers."""


def proc_status_bytes(field):
    """A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def reset_peak_rss():
    """Resets VmHWM to the current resident set (clear_refs 5); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False

"""The device room: how a phone (or this machine standing in for one) runs the programs.

:mod:`.transport` is the seam (:class:`Transport` and its errors); :mod:`.adb` its adb member;
:mod:`.workspace` the session's folder on a device; :mod:`.llama_runs` and :mod:`.executor_runs`
upstream's runners' contracts; :mod:`.runner_output` their output formats; :mod:`.pool` one
phone per xdist worker; :mod:`.setup` the configure-time checks; :mod:`.session` a phone for one
session. Import the modules themselves: this face re-exports nothing.
"""

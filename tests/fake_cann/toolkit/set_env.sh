# CANN's set_env.sh, for the fake CANN (test-only): the toolkit this file is in, laid out as tools/versions.py's
# _toolkit() does (lib64 the fake CANN's libraries). Like the real one, it is sourced, sets the toolkit's home, puts
# its libraries on LD_LIBRARY_PATH and its Python modules (python/site-packages: the acl stand-in) on PYTHONPATH.
_npu_ext_home="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export ASCEND_TOOLKIT_HOME="$_npu_ext_home" ASCEND_HOME_PATH="$_npu_ext_home" ASCEND_OPP_PATH="$_npu_ext_home/opp"
export LD_LIBRARY_PATH="$_npu_ext_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$_npu_ext_home/python/site-packages${PYTHONPATH:+:$PYTHONPATH}"
unset _npu_ext_home

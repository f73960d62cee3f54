# -*- Python -*-
# GoogleTest unit tests, run by the same lit invocation as the lit tests.

import os
import lit.formats

config.name = "linfuse-unit"
config.suffixes = []
config.test_source_root = os.path.join(config.linfuse_obj_root, "test", "Unit")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")

"""Identity of the npu-fb format: file identifier and version.

A reader accepts any buffer whose major version equals VERSION_MAJOR; minor versions only
add optional fields (newer minors stay readable) or opcodes (which an older reader's
verifier rejects as unknown, naming the instruction).
"""
FORMAT_NAME = "npu-fb"
FILE_IDENTIFIER = b"NPUF"
VERSION_MAJOR = 2
VERSION_MINOR = 10

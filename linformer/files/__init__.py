"""Files every command writes and reads, one concern a module; import a name from the module that holds it:

- ``atomic``: the one atomic writer (files, output directories, sets of files written as one);
- ``outputs``: the rule for output paths a user chooses, and what made an output (``made_by``);
- ``storage``: what the storage refuses a write for, in one error line;
- ``temporaries``: an atomic write's temporaries, named and removed;
- ``hashing``: file states, sha256 digests, checksum listings and the one cache-key scheme;
- ``mappings``: YAML and JSON mapping readers;
- ``tables``: Markdown tables;
- ``names``: what may name a file or folder;
- ``locations``: the repository, the scripts, and paths read from and written into records;
- ``processes``: whether a process id is alive here;
- ``locks``: a run's lock file and its holder, and blocks one process at a time runs (an flock);
- ``runs``: a run directory's file names, record reader and checkpoints.
"""

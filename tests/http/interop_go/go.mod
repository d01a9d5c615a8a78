module weft.test/interop

go 1.22

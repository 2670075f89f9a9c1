# -*- coding: latin-1 -*-
name = 'café'
print(name)
